//! Reading one variable: the typed getters every settings group uses, each turning a bad
//! value into a [`SettingsError`] that names the variable.

use std::time::Duration;

use super::SettingsError;

/// Reads variables through `lookup` so that tests need not touch the process environment.
pub struct Env<F: Fn(&str) -> Option<String>>(pub F);

impl<F: Fn(&str) -> Option<String>> Env<F> {
    pub(super) fn raw(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    pub(super) fn string(&self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    pub(super) fn err(&self, name: &str, value: &str, expected: &str) -> SettingsError {
        SettingsError {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    /// Go's `strconv.ParseBool` accepts exactly these spellings.
    pub(super) fn boolean(&self, name: &str, default: bool) -> Result<bool, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => match v.as_str() {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
                "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
                "" => Ok(default),
                _ => Err(self.err(name, &v, "a boolean such as true or false")),
            },
        }
    }

    pub(super) fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
        expected: &str,
    ) -> Result<T, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) if v.is_empty() => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| self.err(name, &v, expected)),
        }
    }

    /// A map in envconfig's syntax, `k1<sep>v1,k2<sep>v2`; items are trimmed, empty ones
    /// skipped, and an item without the separator or with an empty key is an error.
    pub(super) fn pairs(
        &self,
        name: &str,
        sep: char,
    ) -> Result<Vec<(String, String)>, SettingsError> {
        let Some(raw) = self.raw(name) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item.split_once(sep) {
                Some((k, v)) if !k.trim().is_empty() => {
                    out.push((k.trim().to_owned(), v.trim().to_owned()))
                }
                _ => {
                    return Err(self.err(
                        name,
                        &raw,
                        &format!("a list such as k1{sep}v1,k2{sep}v2"),
                    ));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn duration(
        &self,
        name: &str,
        default: Duration,
    ) -> Result<Duration, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) if v.is_empty() => Ok(default),
            Some(v) => parse_go_duration(&v)
                .ok_or_else(|| self.err(name, &v, "a duration such as 10s, 150us or 1h30m")),
        }
    }

    /// A duration that paces a loop (a flush, a retry): zero would spin it, so zero is
    /// refused, where upstream's Go ticker would panic or its retry loop would spin.
    pub(super) fn interval(
        &self,
        name: &str,
        default: Duration,
    ) -> Result<Duration, SettingsError> {
        let d = self.duration(name, default)?;
        if d.is_zero() {
            let v = self.raw(name).unwrap_or_default();
            return Err(self.err(name, &v, "a duration above 0, such as 10s"));
        }
        Ok(d)
    }
}

/// Parses Go's `time.ParseDuration` syntax (`300ms`, `1.5h`, `2h45m`, `0`); negative
/// durations are rejected.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * scale;
    }
    if !total.is_finite() || total > 1e12 {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}
