//! Paging of list endpoints: `limit` rows per page, `pagenumber` counting from 1,
//! newest first.

use serde::Serialize;

use crate::catalogue::Endpoint;
use crate::validate::Valid;

/// Largest `limit` a caller may ask for (the catalogue enforces it; the spec names none).
pub const MAX_LIMIT: u32 = 1000;

/// One requested page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rows per page, 1 ..= [`MAX_LIMIT`].
    pub limit: u32,
    /// Page number, from 1.
    pub pagenumber: u32,
}

/// What the original reports next to a paged list (`page`, `showing`, `total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageInfo {
    /// The page returned.
    pub page: u32,
    /// Rows on this page.
    pub showing: usize,
    /// Rows on all pages.
    pub total: usize,
}

impl Page {
    /// The page of a validated call to a list endpoint; `None` for endpoints without paging.
    /// Values come from validation, which already applied the defaults (10, or 100 for
    /// `public/spreads-list` and `marketplace/signals-feed`).
    pub fn of(endpoint: &Endpoint, valid: &Valid) -> Option<Page> {
        let paging = endpoint.paging?;
        let clamp = |v: Option<i64>, dflt: u32, hi: u32| {
            v.map_or(dflt, |v| v.clamp(1, i64::from(hi)) as u32)
        };
        Some(Page {
            limit: clamp(valid.integer("limit"), paging.default_limit, MAX_LIMIT),
            pagenumber: clamp(valid.integer("pagenumber"), 1, u32::MAX),
        })
    }

    /// Rows to skip (for `LIMIT ? OFFSET ?` in a store).
    pub fn offset(&self) -> u64 {
        u64::from(self.pagenumber.saturating_sub(1)) * u64::from(self.limit)
    }

    /// Cuts one page out of `oldest_first` (records in creation order), newest first.
    ///
    /// ```
    /// use trading_model::Page;
    /// let rows = [1, 2, 3, 4, 5];
    /// let (page, info) = Page { limit: 2, pagenumber: 2 }.apply(&rows);
    /// assert_eq!(page, [3, 2]);
    /// assert_eq!((info.page, info.showing, info.total), (2, 2, 5));
    /// ```
    pub fn apply<T: Clone>(&self, oldest_first: &[T]) -> (Vec<T>, PageInfo) {
        let total = oldest_first.len();
        let skip = usize::try_from(self.offset()).unwrap_or(usize::MAX);
        let rows: Vec<T> = oldest_first
            .iter()
            .rev()
            .skip(skip)
            .take(self.limit as usize)
            .cloned()
            .collect();
        let info = PageInfo {
            page: self.pagenumber,
            showing: rows.len(),
            total,
        };
        (rows, info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Catalogue, Context, Params, validate};

    #[test]
    fn defaults_and_overrides_from_validation() {
        let cat = Catalogue::builtin();
        let page = |path: &str, q: &str| {
            let ep = cat.get(path).unwrap();
            let v = validate(ep, &Params::from_query(q), &Context::default()).unwrap();
            Page::of(ep, &v)
        };
        assert_eq!(
            page("articles/list", ""),
            Some(Page {
                limit: 10,
                pagenumber: 1
            })
        );
        assert_eq!(
            page("public/spreads-list", ""),
            Some(Page {
                limit: 100,
                pagenumber: 1
            })
        );
        assert_eq!(
            page("marketplace/signals-feed", "pagenumber=3")
                .unwrap()
                .pagenumber,
            3
        );
        assert_eq!(page("system/timestamp", ""), None);
    }

    #[test]
    fn pages_past_the_end_are_empty() {
        let (rows, info) = Page {
            limit: 10,
            pagenumber: u32::MAX,
        }
        .apply(&[1, 2, 3]);
        assert!(rows.is_empty());
        assert_eq!(info.total, 3);
        let (rows, _) = Page {
            limit: 2,
            pagenumber: 2,
        }
        .apply(&[1, 2, 3]);
        assert_eq!(rows, [1]);
    }
}
