//! The answers of the trending-news endpoints over the invented archive of
//! [`super::news`]: articles by day with their price impact, the watchlist, sources,
//! statistics and source impact. What it deliberately does not do: no reading of the
//! keywords users added or of the caller's plan; the server passes both in.
//!
//! The archive is the 60 days before the clock; articles appear when the clock passes
//! their publication second.

use serde_json::{Value, json};

use super::Market;
use super::news::{
    Article, HORIZONS, IMPACT_PAIRS, Impact, ImpactStatus, SOURCES, TOPICS, articles_between,
    impacts, sources_containing,
};
use crate::errors::ApiError;
use crate::typed::{
    ExchangeindexRelevantNews, PublicTrendingNewsData, PublicTrendingNewsSourceImpact,
    PublicTrendingNewsWatchlist,
};

/// Days of news the archive keeps.
pub const ARCHIVE_DAYS: u64 = 60;
/// Articles answered by `exchangeindex/relevant-news`.
const RELEVANT_MAX: usize = 50;
/// Entries per ranking in source impact.
const RANKING: usize = 5;
/// The horizon callers without a subscription see (index into `HORIZONS`): 3600 s, the
/// one the original offers without a subscription.
const PUBLIC_HORIZON: usize = 6;

/// Lower-cased, trimmed terms of a csv filter.
pub fn terms(given: Option<&[String]>) -> Vec<String> {
    given
        .unwrap_or(&[])
        .iter()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The articles of the archive at `now_s`, oldest first.
pub fn archive(m: &Market, now_s: u64) -> Vec<Article> {
    articles_between(
        m.seed(),
        now_s.saturating_sub(ARCHIVE_DAYS * 86_400),
        now_s + 1,
    )
}

/// Whether an article matches a watched keyword: one of its keywords equals it (ignoring
/// `/` and spaces, so `btc/usdt` matches `btcusdt`) or its title contains it.
pub fn matches(a: &Article, keyword: &str) -> bool {
    let norm: String = keyword
        .to_lowercase()
        .chars()
        .filter(|c| *c != '/' && *c != ' ')
        .collect();
    a.keywords.contains(&norm) || a.title.to_lowercase().contains(&keyword.to_lowercase())
}

/// The monitored keywords `(id, keyword, recategory)`: the built-in ones (pairs, their
/// assets, topics) with ids from 1, then the keywords users added (`(record id, name)`,
/// in record order); a keyword already watched is not repeated.
pub fn watchlist<'a>(
    user_keywords: impl IntoIterator<Item = (i64, &'a str)>,
) -> Vec<(i64, String, String)> {
    let mut out: Vec<(i64, String, String)> = Vec::new();
    let push = |out: &mut Vec<(i64, String, String)>, k: String, cat: String, id: Option<i64>| {
        if !out.iter().any(|(_, x, _)| x.eq_ignore_ascii_case(&k)) {
            let id = id.unwrap_or(out.len() as i64 + 1);
            out.push((id, k, cat));
        }
    };
    for (b, q) in IMPACT_PAIRS {
        let cat = format!("{b}{q}").to_lowercase();
        push(
            &mut out,
            format!("{b}/{q}").to_lowercase(),
            cat.clone(),
            None,
        );
        push(&mut out, cat.clone(), cat.clone(), None);
        if let Some(name) = super::asset_name(b) {
            push(&mut out, name.to_lowercase(), cat, None);
        }
    }
    for t in TOPICS {
        push(&mut out, t.to_owned(), "topic".to_owned(), None);
    }
    for (id, name) in user_keywords {
        push(
            &mut out,
            name.trim().to_lowercase(),
            "user".to_owned(),
            Some(id),
        );
    }
    out
}

/// `public/trending-news-watchlist`: the watched keywords containing a filter term, each
/// with how many archived articles match it.
pub fn watchlist_records(
    m: &Market,
    now_s: u64,
    watch: Vec<(i64, String, String)>,
    p: &PublicTrendingNewsWatchlist,
) -> Value {
    let filter = terms(p.keyword_contains.as_deref());
    let archive = archive(m, now_s);
    Value::Array(
        watch
            .into_iter()
            .filter(|(_, k, _)| filter.is_empty() || filter.iter().any(|f| k.contains(f)))
            .map(|(id, k, recategory)| {
                let count = archive.iter().filter(|a| matches(a, &k)).count();
                json!({"id": id, "keywords": k, "recategory": recategory, "article_count": count})
            })
            .collect(),
    )
}

/// `public/trending-news-sources`: the publications' names, sorted.
pub fn source_names() -> Value {
    let mut names: Vec<&str> = SOURCES.iter().map(|s| s.0).collect();
    names.sort_unstable();
    json!(names)
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `(year, month, day)` of a day counted from 1970-01-01 (Howard Hinnant's
/// civil_from_days), so no calendar crate is needed.
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// The spec's article date: `time_published`, `day` (weekday name), `format1`
/// (`YYYY-MM-DD`) and `format2` (`29th May 2020 12:06`), in UTC.
pub fn date_record(s: u64) -> Value {
    let (y, month, d) = civil(s / 86_400);
    let (hh, mm) = (s % 86_400 / 3600, s % 3600 / 60);
    let suffix = match (d % 10, d % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    json!({
        "time_published": s,
        // 1970-01-01 was a Thursday.
        "day": WEEKDAYS[((s / 86_400 + 3) % 7) as usize],
        "format1": format!("{y:04}-{month:02}-{d:02}"),
        "format2": format!("{d}{suffix} {} {y:04} {hh:02}:{mm:02}", MONTHS[month as usize - 1]),
    })
}

/// Prices and impacts as the records show them: eight decimals.
fn price(x: f64) -> String {
    format!("{x:.8}")
}

/// The article record with every impact horizon; horizons beyond the public one answer
/// `Subscription required.` unless `subscribed`.
pub fn record(m: &Market, a: &Article, now_s: u64, subscribed: bool) -> Value {
    let mut r = json!({
        "id": a.id,
        "date": date_record(a.time_published),
        "title": a.title,
        "brief": a.brief,
        "keywords": a.keywords.join(","),
        "url": a.url,
        "source": a.source,
        "image": a.image,
        "domain": a.domain,
        "author": a.author,
    });
    for (h, (after, _)) in HORIZONS.iter().enumerate() {
        let value = if subscribed || h == PUBLIC_HORIZON {
            let impacts = impacts(m, a, h, now_s);
            let pending = impacts
                .iter()
                .filter(|i| i.status == ImpactStatus::Pending)
                .count();
            let mut data = serde_json::Map::new();
            for i in impacts {
                data.insert(
                    i.pair_id.clone(),
                    match i.status {
                        ImpactStatus::Compiled => json!({
                            "status": "compiled", "pair": i.pair, "before": price(i.before),
                            "after": price(i.after), "difference": price(i.difference()),
                        }),
                        ImpactStatus::Pending => json!({"status": "pending", "pair": i.pair}),
                    },
                );
            }
            let status = if pending == 0 {
                "compiled".to_owned()
            } else {
                format!("{pending} pending")
            };
            json!({"status": status, "data": data})
        } else {
            json!({"status": "Subscription required.", "data": []})
        };
        r[format!("price_impact_{after}s")] = value;
    }
    let tone: serde_json::Map<String, Value> = a
        .tone_scores(m.seed())
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    r["tone"] = json!({"status": "compiled", "data": tone});
    r
}

/// `public/trending-news-data`: one day's articles (newest first), filtered by keyword,
/// title and brief terms.
pub fn news_data(
    m: &Market,
    now_s: u64,
    p: &PublicTrendingNewsData,
    subscribed: bool,
) -> Result<Value, ApiError> {
    let date = p.date.as_str();
    let day = super::public::day_start_s(date)
        .ok_or_else(|| ApiError::refused("date", "Expected YYYY-MM-DD."))?;
    if day > now_s {
        return Err(ApiError::refused("date", "The date lies in the future."));
    }
    let oldest = now_s.saturating_sub(ARCHIVE_DAYS * 86_400);
    if day + 86_400 <= oldest {
        return Err(ApiError::refused(
            "date",
            format!("The archive keeps the last {ARCHIVE_DAYS} days."),
        ));
    }
    let keyword = terms(p.keyword_contains.as_deref());
    let title = terms(p.title_contains.as_deref());
    let brief = terms(p.brief_contains.as_deref());
    let exclude = terms(p.exclude_keywords.as_deref());
    let any = |terms: &[String], text: &str| {
        terms.is_empty()
            || terms
                .iter()
                .any(|t| text.to_lowercase().contains(t.as_str()))
    };
    let mut list: Vec<Article> =
        articles_between(m.seed(), day.max(oldest), (day + 86_400).min(now_s + 1))
            .into_iter()
            .filter(|a| {
                (keyword.is_empty() || a.keywords.iter().any(|k| any(&keyword, k)))
                    && any(&title, &a.title)
                    && any(&brief, &a.brief)
                    && !a.keywords.iter().any(|k| exclude.contains(k))
            })
            .collect();
    list.reverse();
    Ok(Value::Array(
        list.iter()
            .map(|a| record(m, a, now_s, subscribed))
            .collect(),
    ))
}

/// `public/trending-news-statistics` over the archive and the watchlist.
pub fn statistics(m: &Market, now_s: u64, watch: &[(i64, String, String)]) -> Value {
    let archive = archive(m, now_s);
    let matched = watch
        .iter()
        .filter(|(_, k, _)| archive.iter().any(|a| matches(a, k)))
        .count();
    let within = |s: u64| {
        archive
            .iter()
            .filter(|a| a.time_published + s > now_s)
            .count()
    };
    let sources: std::collections::BTreeSet<&str> = archive.iter().map(|a| a.source).collect();
    json!({
        "keywords_monitored": watch.len(),
        "total_articles_found": archive.len(),
        "total_keywords_matched": matched,
        "history": {
            "added_in_last_hour": within(3600),
            "last_24_hours": within(86_400),
            "last_48_hours": within(2 * 86_400),
            "last_7_days": within(7 * 86_400),
            "last_30_days": within(30 * 86_400),
        },
        "sources": sources.len(),
        "last_update": archive.last().map(|a| a.time_published),
        "archive_days": ARCHIVE_DAYS,
    })
}

/// `public/trending-news-source-impact`: how each matching publication's articles moved
/// the impact pairs.
pub fn source_impact(
    m: &Market,
    now_s: u64,
    p: &PublicTrendingNewsSourceImpact,
) -> Result<Value, ApiError> {
    let wanted = p.source_contains.as_str();
    let sources = sources_containing(wanted);
    if sources.is_empty() {
        let mut e = ApiError::refused(
            "source_contains",
            "No publication's name contains this text; see public/trending-news-sources.",
        );
        if let Some(v) = e.validation.as_mut() {
            v.missing_information[0]["supported"] =
                json!(SOURCES.iter().map(|s| s.0).collect::<Vec<_>>());
        }
        return Err(e);
    }
    let archive = archive(m, now_s);
    let mut data = serde_json::Map::new();
    for source in sources {
        let articles: Vec<&Article> = archive.iter().filter(|a| a.source == source).collect();
        for (pair_id, impact) in impact_of_source(m, now_s, &articles) {
            let per_source = data.entry(pair_id).or_insert_with(|| json!({}));
            per_source[source] = impact;
        }
    }
    Ok(Value::Object(data))
}

/// One publication's articles ranked by how they moved each impact pair: pair id and the
/// publication's record for that pair.
fn impact_of_source(m: &Market, now_s: u64, articles: &[&Article]) -> Vec<(String, Value)> {
    // Per article the public-horizon impacts, computed once for all pairs.
    let impacts: Vec<(&Article, Vec<Impact>)> = articles
        .iter()
        .map(|a| (*a, impacts(m, a, PUBLIC_HORIZON, now_s)))
        .filter(|(_, i)| i.iter().all(|x| x.status == ImpactStatus::Compiled))
        .collect();
    let mut out = Vec::new();
    for (p, (b, q)) in IMPACT_PAIRS.iter().enumerate() {
        let pair_id = format!("{b}{q}").to_lowercase();
        let mut rows: Vec<(&Article, f64)> = impacts
            .iter()
            .map(|(a, i)| (*a, i[p].difference()))
            .collect();
        let sum: f64 = rows.iter().map(|r| r.1).sum();
        let item = |a: &Article, d: f64, bull: bool| {
            let mut v = json!({
                "id": a.id, "keywords": a.keywords.join(","),
                "time_published": a.time_published, "ago": now_s - a.time_published,
            });
            if bull {
                v[format!("diff_{pair_id}")] = json!(price(d));
            } else {
                v["impact"] = json!(price(d));
            }
            v
        };
        let total = rows.len();
        let mut bull: Vec<(&Article, f64)> = rows.iter().copied().filter(|r| r.1 > 0.0).collect();
        rows.retain(|r| r.1 < 0.0);
        let mut bear = rows;
        let recent = |v: &[(&Article, f64)], bull_side: bool| -> Vec<Value> {
            let mut v = v.to_vec();
            v.sort_by_key(|b| std::cmp::Reverse(b.0.time_published));
            v.iter()
                .take(RANKING)
                .map(|(a, d)| item(a, *d, bull_side))
                .collect()
        };
        let most_recent_bull = recent(&bull, true);
        let most_recent_bear = recent(&bear, false);
        bull.sort_by(|a, b| b.1.total_cmp(&a.1));
        bear.sort_by(|a, b| a.1.total_cmp(&b.1));
        let record = json!({
            "total_articles": total,
            "sum_impact": price(sum),
            "top_ranking_bull": bull.iter().take(RANKING).map(|(a, d)| item(a, *d, true)).collect::<Vec<_>>(),
            "top_ranking_bear": bear.iter().take(RANKING).map(|(a, d)| item(a, *d, false)).collect::<Vec<_>>(),
            "most_recent_bull": most_recent_bull,
            "most_recent_bear": most_recent_bear,
        });
        out.push((pair_id, record));
    }
    out
}

/// News of the last 60 days about either asset of a trading code, newest first.
pub fn relevant(m: &Market, now: u64, p: &ExchangeindexRelevantNews) -> Result<Value, ApiError> {
    let code = p.symbol.as_str();
    let sym = m
        .symbol(code)
        .ok_or_else(|| super::public::unknown_code("symbol", code))?;
    let now_s = now / 1000;
    let mut list: Vec<Article> = archive(m, now_s)
        .into_iter()
        .filter(|a| a.assets.iter().any(|t| *t == sym.base || *t == sym.quote))
        .collect();
    list.reverse();
    list.truncate(RELEVANT_MAX);
    Ok(json!({
        "symbol": sym.code,
        "assets": [sym.base, sym.quote],
        "articles": list.iter().map(|a| record(m, a, now_s, false)).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        // 2020-05-29 12:06:54 UTC was a Friday (the original's example).
        let r = date_record(1_590_754_014);
        assert_eq!(r["format1"], "2020-05-29");
        assert_eq!(r["day"], "Friday");
        assert_eq!(r["format2"], "29th May 2020 12:06");
        assert_eq!(date_record(0)["day"], "Thursday");
        assert_eq!(
            date_record(951_782_400)["format2"],
            "29th February 2000 00:00"
        );
        assert_eq!(
            date_record(1_605_052_800)["format2"],
            "11th November 2020 00:00"
        );
        assert_eq!(
            date_record(1_709_164_800)["format2"],
            "29th February 2024 00:00"
        );
        assert_eq!(date_record(1_709_164_800)["day"], "Thursday");
    }
}

#[cfg(test)]
mod watch_tests {
    use super::*;

    #[test]
    fn user_keywords_follow_the_builtin_ones_once() {
        let builtin = watchlist([]);
        let first = builtin[0].1.clone();
        let all = watchlist([(90, "  NewCoin "), (91, first.as_str())]);
        assert_eq!(all.len(), builtin.len() + 1);
        assert_eq!(
            all.last().unwrap(),
            &(90, "newcoin".to_owned(), "user".to_owned())
        );
        assert!(builtin.iter().enumerate().all(|(i, w)| w.0 == i as i64 + 1));
    }
}
