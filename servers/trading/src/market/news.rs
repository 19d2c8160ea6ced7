//! Trending news over the invented archive of `trading_model::market::news`: articles by
//! day with their price impact, the watchlist, sources, statistics and source impact.
//!
//! The archive is the 60 days before the clock; articles appear when the clock passes
//! their publication second. Keywords users add (stored by the generic resources as
//! `news_keyword` records) join the watchlist; nothing is written here.

use chrono::Datelike as _;
use serde_json::{Value, json};
use trading_model::market::Market;
use trading_model::market::news::{
    self, Article, HORIZONS, IMPACT_PAIRS, ImpactStatus, SOURCES, TOPICS,
};
use trading_model::{ApiError, Valid, typed};

use super::answers::unknown_code;
use crate::context::{RequestContext, refused, refused_with};

/// Days of news the archive keeps.
pub(super) const ARCHIVE_DAYS: u64 = 60;
/// Articles answered by `exchangeindex/relevant-news`.
const RELEVANT_MAX: usize = 50;
/// Entries per ranking in source impact.
const RANKING: usize = 5;
/// The horizon callers without a subscription see (index into `HORIZONS`): 3600 s, the
/// one the original offers without a subscription.
const PUBLIC_HORIZON: usize = 6;

/// Whether the caller's plan includes every impact horizon: a signed call on a paid
/// plan (`subscription.pro_version`). Anonymous and Free callers see the public one.
fn subscribed(env: &RequestContext) -> bool {
    env.caller.as_ref().is_some_and(|c| {
        trading_model::plans::plan_details(&c.plan)["subscription"]["pro_version"] == true
    })
}

pub(super) fn call(path: &str, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let m = &*env.market;
    let now_s = env.now_ms / 1000;
    match path {
        "public/trending-news-data" => news_data(m, now_s, valid, subscribed(env)),
        "public/trending-news-watchlist" => {
            let p = typed::PublicTrendingNewsWatchlist::from_valid(valid)?;
            let filter = terms(p.keyword_contains.as_deref());
            let archive = archive(m, now_s);
            Ok(Value::Array(
                watchlist(env)?
                    .into_iter()
                    .filter(|(_, k, _)| filter.is_empty() || filter.iter().any(|f| k.contains(f)))
                    .map(|(id, k, recategory)| {
                        let count = archive.iter().filter(|a| matches(a, &k)).count();
                        json!({"id": id, "keywords": k, "recategory": recategory, "article_count": count})
                    })
                    .collect(),
            ))
        }
        "public/trending-news-sources" => {
            let mut names: Vec<&str> = SOURCES.iter().map(|s| s.0).collect();
            names.sort_unstable();
            Ok(json!(names))
        }
        "public/trending-news-statistics" => statistics(m, now_s, env),
        "public/trending-news-source-impact" => source_impact(m, now_s, valid),
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData)),
    }
}

/// Lower-cased, trimmed terms of a csv filter.
fn terms(given: Option<&[String]>) -> Vec<String> {
    given
        .unwrap_or(&[])
        .iter()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn archive(m: &Market, now_s: u64) -> Vec<Article> {
    news::articles_between(
        m.seed(),
        now_s.saturating_sub(ARCHIVE_DAYS * 86_400),
        now_s + 1,
    )
}

/// Whether an article matches a watched keyword: one of its keywords equals it (ignoring
/// `/` and spaces, so `btc/usdt` matches `btcusdt`) or its title contains it.
fn matches(a: &Article, keyword: &str) -> bool {
    let norm: String = keyword
        .to_lowercase()
        .chars()
        .filter(|c| *c != '/' && *c != ' ')
        .collect();
    a.keywords.contains(&norm) || a.title.to_lowercase().contains(&keyword.to_lowercase())
}

/// The monitored keywords `(id, keyword, recategory)`: the built-in ones (pairs, their
/// assets, topics) with ids from 1, then every keyword users added, by record id.
fn watchlist(env: &RequestContext) -> Result<Vec<(i64, String, String)>, ApiError> {
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
        if let Some(name) = trading_model::market::asset_name(b) {
            push(&mut out, name.to_lowercase(), cat, None);
        }
    }
    for t in TOPICS {
        push(&mut out, t.to_owned(), "topic".to_owned(), None);
    }
    let keywords = env
        .store
        .records_of_everyone("news_keyword")
        .map_err(crate::context::db)?;
    for (_, keyword) in keywords {
        let id = keyword.id;
        let name = keyword.fields.get("name").and_then(Value::as_str);
        if let Some(name) = name {
            push(
                &mut out,
                name.trim().to_lowercase(),
                "user".to_owned(),
                Some(id),
            );
        }
    }
    Ok(out)
}

/// The spec's article date: `time_published`, `day` (weekday name), `format1`
/// (`YYYY-MM-DD`) and `format2` (`29th May 2020 12:06`), in UTC.
fn date_record(s: u64) -> Value {
    let t = i64::try_from(s)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or_default();
    let d = t.day();
    let suffix = match (d % 10, d % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    json!({
        "time_published": s,
        "day": t.format("%A").to_string(),
        "format1": t.format("%Y-%m-%d").to_string(),
        "format2": format!("{d}{suffix} {}", t.format("%B %Y %H:%M")),
    })
}

fn price(x: f64) -> String {
    format!("{x:.8}")
}

/// The article record with every impact horizon; horizons beyond the public one answer
/// `Subscription required.` unless `subscribed`.
pub(super) fn record(m: &Market, a: &Article, now_s: u64, subscribed: bool) -> Value {
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
            let impacts = news::impacts(m, a, h, now_s);
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

fn news_data(m: &Market, now_s: u64, valid: &Valid, subscribed: bool) -> Result<Value, ApiError> {
    let p = typed::PublicTrendingNewsData::from_valid(valid)?;
    let date = p.date.as_str();
    let day = trading_model::market::public::day_start_s(date)
        .ok_or_else(|| refused("date", "Expected YYYY-MM-DD."))?;
    if day > now_s {
        return Err(refused("date", "The date lies in the future."));
    }
    let oldest = now_s.saturating_sub(ARCHIVE_DAYS * 86_400);
    if day + 86_400 <= oldest {
        return Err(refused(
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
        news::articles_between(m.seed(), day.max(oldest), (day + 86_400).min(now_s + 1))
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

fn statistics(m: &Market, now_s: u64, env: &RequestContext) -> Result<Value, ApiError> {
    let archive = archive(m, now_s);
    let watch = watchlist(env)?;
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
    Ok(json!({
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
    }))
}

fn source_impact(m: &Market, now_s: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::PublicTrendingNewsSourceImpact::from_valid(valid)?;
    let wanted = p.source_contains.as_str();
    let sources = news::sources_containing(wanted);
    if sources.is_empty() {
        return Err(refused_with(
            "source_contains",
            "No publication's name contains this text; see public/trending-news-sources.",
            Some((
                "supported",
                json!(SOURCES.iter().map(|s| s.0).collect::<Vec<_>>()),
            )),
        ));
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
    let impacts: Vec<(&Article, Vec<news::Impact>)> = articles
        .iter()
        .map(|a| (*a, news::impacts(m, a, PUBLIC_HORIZON, now_s)))
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
pub(super) fn relevant(m: &Market, now: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::ExchangeindexRelevantNews::from_valid(valid)?;
    let code = p.symbol.as_str();
    let sym = m.symbol(code).ok_or_else(|| unknown_code("symbol", code))?;
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
            trading_model::market::public::day_start_s("2020-05-29"),
            Some(1_590_710_400)
        );
    }
}
