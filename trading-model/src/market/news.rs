//! The sandbox's invented crypto news: articles generated from our own templates and the
//! market seed, and their price impact measured on the simulated market.
//!
//! Time is cut into six-hour slots; every slot holds one or two articles whose content and
//! publication second are a pure function of `(seed, slot)`. So the news, like the prices,
//! needs no state: an article's id names its slot, any period can be listed directly, and
//! articles appear as the clock passes their publication time. No text here is taken from
//! any real publication; sources, authors and domains are invented (domains under the
//! reserved `.example` top-level domain).
//!
//! What it deliberately does not do: decide which articles a caller may see (the server
//! applies its window and plan tiers) or keep user keywords (those are stored records).

use super::Market;

/// Length of one slot (s).
pub const SLOT_S: u64 = 21_600;
/// Most articles per slot.
const PER_SLOT: u64 = 2;

/// The pairs whose price reaction is measured, as `(base, quote)`; the pair id is the
/// lower-case concatenation (`btcusdt`).
pub const IMPACT_PAIRS: [(&str, &str); 7] = [
    ("BTC", "USDT"),
    ("ETH", "USDT"),
    ("ADA", "USDT"),
    ("XRP", "USDT"),
    ("ETH", "BTC"),
    ("ADA", "BTC"),
    ("XRP", "BTC"),
];

/// Impact horizons as `(after, before)` seconds relative to publication: the price
/// `before` seconds before publication is compared with the price `after` seconds after.
pub const HORIZONS: [(u64, u64); 7] = [
    (120, 30),
    (300, 60),
    (600, 90),
    (900, 90),
    (1200, 90),
    (1800, 90),
    (3600, 300),
];

/// The invented publications, each with its domain stem.
pub const SOURCES: [(&str, &str); 10] = [
    ("Block Street Journal", "blockstreetjournal"),
    ("Chain Chronicle", "chainchronicle"),
    ("Hashrate Herald", "hashrateherald"),
    ("Ledger Lantern", "ledgerlantern"),
    ("Mempool Monitor", "mempoolmonitor"),
    ("Satoshi Sentinel", "satoshisentinel"),
    ("Token Tribune", "tokentribune"),
    ("The Node Gazette", "nodegazette"),
    ("Altcoin Almanac", "altcoinalmanac"),
    ("Crypto Courier Daily", "cryptocourierdaily"),
];

/// The publications whose name contains `text`, ignoring case and surrounding blanks
/// (`source_contains` of source impact); none for blank text.
///
/// ```
/// use trading_model::market::news::sources_containing;
/// assert_eq!(sources_containing("street"), ["Block Street Journal"]);
/// assert_eq!(sources_containing(" CHAIN chronicle "), ["Chain Chronicle"]);
/// assert_eq!(sources_containing("Daily").len(), 1);
/// assert!(sources_containing("  ").is_empty());
/// assert!(sources_containing("Nobody Weekly").is_empty());
/// ```
pub fn sources_containing(text: &str) -> Vec<&'static str> {
    let wanted = text.trim().to_lowercase();
    if wanted.is_empty() {
        return Vec::new();
    }
    SOURCES
        .iter()
        .map(|s| s.0)
        .filter(|name| name.to_lowercase().contains(&wanted))
        .collect()
}

const FIRST: [&str; 12] = [
    "Avery", "Jordan", "Mina", "Tobias", "Priya", "Lukas", "Sofia", "Kenji", "Amara", "Rafael",
    "Ines", "Dmitri",
];
const LAST: [&str; 12] = [
    "Calloway",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Haddad",
    "Brennan",
    "Takeda",
    "Varga",
    "Osei",
    "Castell",
    "Nakamura",
    "Whitlock",
];

/// Assets articles are written about: ticker and name.
const SUBJECTS: [(&str, &str); 8] = [
    ("BTC", "Bitcoin"),
    ("ETH", "Ethereum"),
    ("ADA", "Cardano"),
    ("XRP", "Ripple"),
    ("LTC", "Litecoin"),
    ("SOL", "Solana"),
    ("DOGE", "Dogecoin"),
    ("BNB", "Binance Coin"),
];

const VENUES: [&str; 6] = [
    "Binance",
    "Kraken",
    "Bitstamp",
    "Coinbase Pro",
    "OKEx",
    "Bitfinex",
];

/// Topic words a template adds to the keywords; the watchlist monitors them too.
pub const TOPICS: [&str; 10] = [
    "regulation",
    "etf",
    "mining",
    "defi",
    "exchange",
    "staking",
    "whales",
    "adoption",
    "security",
    "derivatives",
];

/// Title, brief, tone (+1 bullish, -1 bearish, 0 neutral) and topic index.
/// `{A}` subject name, `{T}` its ticker, `{B}` a second asset's name, `{V}` a venue,
/// `{N}` a number.
const TEMPLATES: [(&str, &str, i8, usize); 16] = [
    (
        "{A} climbs as {V} reports record weekly volume",
        "Traders moved {N} percent more {T} through {V} this week than in any week this year, and order books stayed deep on both sides.",
        1,
        4,
    ),
    (
        "{A} slides after a lawmaker questions stablecoin reserves",
        "A draft bill circulating this week would require monthly audits of reserves, and {T} sold off across venues within the hour.",
        -1,
        0,
    ),
    (
        "Miners add capacity as {A} difficulty reaches a new high",
        "Public mining firms disclosed {N} new facilities, betting that fees and block rewards will keep covering their power bills.",
        1,
        2,
    ),
    (
        "Large {T} transfers to {V} put traders on alert",
        "On-chain trackers flagged {N} wallets moving coins to exchange deposit addresses, a pattern that often precedes selling.",
        -1,
        6,
    ),
    (
        "Fund managers file for a spot {A} product",
        "The filing names a custodian and a fee of {N} basis points; analysts expect a decision within the next review window.",
        1,
        1,
    ),
    (
        "{A} lending pools shrink as yields fall",
        "Deposits in the largest {T} lending pools dropped by {N} percent, with borrowers repaying loans faster than new money arrived.",
        -1,
        3,
    ),
    (
        "{V} lists new {T} futures with weekly expiries",
        "The contracts settle in {B} and allow leverage up to {N} times, widening the choice of hedges for market makers.",
        0,
        9,
    ),
    (
        "Validators lock more {A} as staking rewards rise",
        "Roughly {N} percent of supply is now staked, reducing the coins available to trade and tightening spreads.",
        1,
        5,
    ),
    (
        "A wallet bug forces a pause in {T} withdrawals at {V}",
        "The venue said funds are safe and that withdrawals will resume once {N} affected addresses are migrated.",
        -1,
        8,
    ),
    (
        "Retail chain starts accepting {A} at checkout",
        "Shoppers in {N} stores can now pay with {T}, settled through a payment processor that converts to cash instantly.",
        1,
        7,
    ),
    (
        "{A} and {B} move in step as volatility fades",
        "The thirty-day correlation between {T} and {B} reached {N} hundredths, the tightest coupling in months.",
        0,
        4,
    ),
    (
        "Regulators fine a broker over {A} custody lapses",
        "The penalty of {N} million covers record-keeping failures; customers' {T} holdings were not affected.",
        -1,
        0,
    ),
    (
        "Developers ship an upgrade that cuts {A} fees",
        "Average {T} transaction costs fell by {N} percent in the first day after the upgrade activated.",
        1,
        3,
    ),
    (
        "Options traders pay up for {T} downside protection",
        "Put premiums on {V} rose {N} percent as desks hedged against a retreat below recent support.",
        -1,
        9,
    ),
    (
        "{A} holds steady while {B} takes the spotlight",
        "Daily {T} ranges narrowed to {N} tenths of a percent as attention shifted to {B} and its new listings.",
        0,
        7,
    ),
    (
        "Audit finds no losses after {V} security drill",
        "An outside firm tested {N} attack paths against the venue's {T} hot wallets and found each one blocked.",
        1,
        8,
    ),
];

/// One generated article.
#[derive(Debug, Clone, PartialEq)]
pub struct Article {
    /// Stable id: slot * 2 + position in the slot.
    pub id: u64,
    /// Publication time (s).
    pub time_published: u64,
    /// Headline.
    pub title: String,
    /// One-sentence summary.
    pub brief: String,
    /// Lower-case keywords: subject name and ticker, related pairs, topic.
    pub keywords: Vec<String>,
    /// Publication.
    pub source: &'static str,
    /// Publication's domain.
    pub domain: String,
    /// Article address.
    pub url: String,
    /// Lead image address.
    pub image: String,
    /// Byline.
    pub author: String,
    /// Tickers the article is about (subject first).
    pub assets: Vec<&'static str>,
    /// Template tone: +1 bullish, -1 bearish, 0 neutral.
    pub tone: i8,
}

impl Article {
    /// Tone scores 0..1 in the seven categories the original reports, derived from the
    /// template's tone with a per-article variation.
    pub fn tone_scores(&self, seed: u64) -> [(&'static str, f64); 7] {
        let u = |salt: u64| (uniform(seed, self.id, 100 + salt) * 100.0).round() / 100.0;
        let (pos, neg) = match self.tone {
            1 => (0.5, 0.0),
            -1 => (0.0, 0.5),
            _ => (0.0, 0.0),
        };
        let cap = |x: f64| (x.min(1.0) * 100.0).round() / 100.0;
        [
            ("anger", cap(neg * 0.6 + u(1) * 0.2)),
            ("fear", cap(neg + u(2) * 0.3)),
            ("joy", cap(pos + u(3) * 0.3)),
            ("sadness", cap(neg * 0.5 + u(4) * 0.2)),
            ("analytical", cap(0.3 + u(5) * 0.6)),
            ("confident", cap(pos * 0.8 + u(6) * 0.3)),
            ("tentative", cap(0.2 + u(7) * 0.4)),
        ]
    }
}

/// Articles published in `[from_s, to_s)`, oldest first.
pub fn articles_between(seed: u64, from_s: u64, to_s: u64) -> Vec<Article> {
    let mut out = Vec::new();
    if to_s <= from_s {
        return out;
    }
    for slot in from_s / SLOT_S..=(to_s - 1) / SLOT_S {
        for a in slot_articles(seed, slot) {
            if (from_s..to_s).contains(&a.time_published) {
                out.push(a);
            }
        }
    }
    out
}

/// The article with `id`, if that slot has one at that position.
pub fn article(seed: u64, id: u64) -> Option<Article> {
    slot_articles(seed, id / PER_SLOT)
        .into_iter()
        .find(|a| a.id == id)
}

fn slot_articles(seed: u64, slot: u64) -> Vec<Article> {
    let count = 1 + (uniform(seed, slot, 0) * PER_SLOT as f64) as u64;
    let mut times: Vec<u64> = (0..count)
        .map(|n| slot * SLOT_S + (uniform(seed, slot, 1 + n) * SLOT_S as f64) as u64)
        .collect();
    times.sort_unstable();
    times
        .into_iter()
        .enumerate()
        .map(|(n, t)| build(seed, slot * PER_SLOT + n as u64, t))
        .collect()
}

fn pick<T: Copy>(list: &[T], seed: u64, id: u64, salt: u64) -> T {
    list[(uniform(seed, id, salt) * list.len() as f64) as usize % list.len()]
}

fn build(seed: u64, id: u64, time_published: u64) -> Article {
    let (title_t, brief_t, tone, topic) = pick(&TEMPLATES, seed, id, 10);
    let (ticker, name) = pick(&SUBJECTS, seed, id, 11);
    let mut other = pick(&SUBJECTS, seed, id, 12);
    if other.0 == ticker {
        other = SUBJECTS[(SUBJECTS.iter().position(|s| s.0 == ticker).unwrap_or(0) + 1) % 8];
    }
    let venue = pick(&VENUES, seed, id, 13);
    let number = 2 + (uniform(seed, id, 14) * 60.0) as u64;
    let fill = |t: &str| {
        t.replace("{A}", name)
            .replace("{T}", ticker)
            .replace("{B}", other.1)
            .replace("{V}", venue)
            .replace("{N}", &number.to_string())
    };
    let title = fill(title_t);
    let brief = fill(brief_t);
    let mut assets = vec![ticker];
    if title_t.contains("{B}") || brief_t.contains("{B}") {
        assets.push(other.0);
    }
    let mut keywords = Vec::new();
    for t in &assets {
        let n = SUBJECTS.iter().find(|s| s.0 == *t).map_or(*t, |s| s.1);
        keywords.push(n.to_ascii_lowercase());
        keywords.push(t.to_ascii_lowercase());
        for (b, q) in IMPACT_PAIRS {
            if b == *t {
                keywords.push(format!("{b}{q}").to_ascii_lowercase());
            }
        }
    }
    keywords.push(TOPICS[topic].to_owned());
    keywords.dedup();
    let (source, stem) = pick(&SOURCES, seed, id, 15);
    let domain = format!("{stem}.example");
    let slug: String = title
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    Article {
        id,
        time_published,
        url: format!("https://{domain}/news/{id}-{slug}"),
        image: format!("https://{domain}/images/{id}.jpg"),
        author: format!(
            "{} {}",
            pick(&FIRST, seed, id, 16),
            pick(&LAST, seed, id, 17)
        ),
        title,
        brief,
        keywords,
        source,
        domain,
        assets,
        tone,
    }
}

/// Whether an impact measurement is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpactStatus {
    /// Both prices are in the past.
    Compiled,
    /// The `after` price lies in the future.
    Pending,
}

/// One pair's reaction to an article over one horizon.
#[derive(Debug, Clone, PartialEq)]
pub struct Impact {
    /// Pair id (`btcusdt`).
    pub pair_id: String,
    /// Pair in upper case (`BTCUSDT`).
    pub pair: String,
    /// Compiled or pending.
    pub status: ImpactStatus,
    /// Reference price before publication.
    pub before: f64,
    /// Price after the horizon (meaningful only when compiled).
    pub after: f64,
}

impl Impact {
    /// `after - before`.
    pub fn difference(&self) -> f64 {
        self.after - self.before
    }
}

/// The reaction of every impact pair to an article over `HORIZONS[horizon]`, as seen at
/// `now_s`. Prices are the market's reference rates (`asset_usd` ratios: an aggregate
/// over exchanges without any exchange's basis).
pub fn impacts(market: &Market, article: &Article, horizon: usize, now_s: u64) -> Vec<Impact> {
    let (after_s, before_s) = HORIZONS[horizon.min(HORIZONS.len() - 1)];
    let t_before = article.time_published.saturating_sub(before_s);
    let t_after = article.time_published + after_s;
    let rate = |b: &str, q: &str, s: u64| {
        let ms = s * 1000;
        market.asset_usd(b, ms).unwrap_or(0.0) / market.asset_usd(q, ms).unwrap_or(1.0)
    };
    IMPACT_PAIRS
        .iter()
        .map(|&(b, q)| {
            let compiled = now_s >= t_after;
            Impact {
                pair_id: format!("{b}{q}").to_ascii_lowercase(),
                pair: format!("{b}{q}"),
                status: if compiled {
                    ImpactStatus::Compiled
                } else {
                    ImpactStatus::Pending
                },
                before: rate(b, q, t_before),
                after: if compiled { rate(b, q, t_after) } else { 0.0 },
            }
        })
        .collect()
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [0, 1) from `(seed, which, salt)`; the news stream is kept apart from the
/// market's streams by its own constant.
pub(crate) fn uniform(seed: u64, which: u64, salt: u64) -> f64 {
    let mut h = mix(seed ^ 0x6e65_7773_0000_0001);
    for part in [which, salt] {
        h = mix(h ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DAY: u64 = 86_400;
    const T: u64 = 1_767_225_600;

    #[test]
    fn sixty_days_hold_enough_articles() {
        let a = articles_between(7, T - 60 * DAY, T);
        assert!(a.len() >= 200, "{}", a.len());
        assert!(
            a.windows(2)
                .all(|w| w[0].time_published <= w[1].time_published)
        );
        let mut ids: Vec<_> = a.iter().map(|x| x.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), a.len());
        assert_eq!(article(7, a[5].id).as_ref(), Some(&a[5]));
        assert_ne!(
            articles_between(8, T - DAY, T),
            articles_between(7, T - DAY, T)
        );
        for x in &a {
            assert!(x.url.starts_with("https://") && x.domain.ends_with(".example"));
            assert!(
                !x.title.contains('{') && !x.brief.contains('{'),
                "{}",
                x.title
            );
            assert!(x.keywords.len() >= 3);
        }
    }

    #[test]
    fn impact_is_pending_until_the_horizon() {
        let m = Market::new(3);
        let a = &articles_between(3, T, T + DAY)[0];
        let p = impacts(&m, a, 6, a.time_published + 10);
        assert!(
            p.iter()
                .all(|i| i.status == ImpactStatus::Pending && i.before > 0.0)
        );
        let c = impacts(&m, a, 6, a.time_published + 3600);
        assert!(
            c.iter()
                .all(|i| i.status == ImpactStatus::Compiled && i.after > 0.0)
        );
        assert_eq!(c[0].pair_id, "btcusdt");
    }

    proptest! {
        #[test]
        fn any_window_is_sorted_and_inside(seed in any::<u64>(), from in 1_500_000_000u64..1_900_000_000, len in 0u64..(3 * DAY)) {
            let a = articles_between(seed, from, from + len);
            prop_assert!(a.iter().all(|x| (from..from + len).contains(&x.time_published)));
            prop_assert!(a.windows(2).all(|w| w[0].id < w[1].id && w[0].time_published <= w[1].time_published));
            for x in &a {
                let scores = x.tone_scores(seed);
                prop_assert!(scores.iter().all(|(_, v)| (0.0..=1.0).contains(v)));
            }
        }
    }
}
