//! The Atom feed of a repository's regressions, for feed readers and chat integrations that
//! follow feeds. Everything outside the feed's own markup is escaped by the template, and
//! characters XML 1.0 cannot carry are dropped first.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use kymo_core::db::{RegressionFilter, RegressionRow};

use super::embed::public_base;
use super::format::{rfc3339, summary};
use crate::error::AppResult;
use crate::state::AppState;

/// Entries a feed holds: the newest regressions.
const FEED_ENTRIES: usize = 50;

#[derive(Template)]
#[template(path = "regressions.xml")]
struct Feed {
    base: String,
    repo: String,
    updated: String,
    entries: Vec<Entry>,
}

struct Entry {
    id: i64,
    title: String,
    updated: String,
    published: String,
    summary: String,
}

pub async fn regressions_feed(
    State(state): State<AppState>,
    Path(repo): Path<String>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let repo = state.db.repository(&repo).await?;
    let filter = RegressionFilter {
        kind: Some("regression".into()),
        ..RegressionFilter::default()
    };
    let mut rows = state.db.regressions(repo.id, &filter).await?;
    // A feed announces, as alerts do: not before a change is confirmed, never a refuted one.
    rows.retain(|r| !matches!(r.confirmation.as_deref(), Some("confirming" | "refuted")));
    // Newest detections first: a reader shows what arrived since it last looked.
    rows.sort_by_key(|r| std::cmp::Reverse((r.detected_at, r.id)));
    rows.truncate(FEED_ENTRIES);
    let updated = rows
        .iter()
        .map(entry_updated)
        .max()
        .unwrap_or(repo.created_at);
    let feed = Feed {
        base: public_base(&headers),
        repo: repo.name,
        updated: rfc3339(updated),
        entries: rows.iter().map(entry).collect(),
    };
    let xml = feed.render().map_err(anyhow::Error::from)?;
    Ok((
        [(header::CONTENT_TYPE, "application/atom+xml; charset=utf-8")],
        xml,
    )
        .into_response())
}

fn entry_updated(r: &RegressionRow) -> i64 {
    r.state_at.unwrap_or(r.detected_at).max(r.detected_at)
}

fn entry(r: &RegressionRow) -> Entry {
    let short = &r.sha[..r.sha.len().min(10)];
    let ci = format!("{:+.1} % to {:+.1} %", r.ci_low_pct, r.ci_high_pct);
    Entry {
        id: r.id,
        title: xml_text(&format!(
            "{} {}: {:+.1} % on {}",
            r.benchmark,
            r.metric,
            r.change_pct,
            &r.machine[..r.machine.len().min(12)]
        )),
        updated: rfc3339(entry_updated(r)),
        published: rfc3339(r.detected_at),
        summary: xml_text(&format!(
            "{short} {}\n{} {} went from {} to {} {} ({:+.1} %, interval {ci}, p = {:.3}, noise {:.1} %). State: {}.",
            summary(&r.message),
            r.benchmark,
            r.metric,
            r.baseline,
            r.value,
            r.unit,
            r.change_pct,
            r.p_value,
            r.noise_pct,
            r.state
        )),
    }
}

/// `text` without the characters XML 1.0 forbids (most control characters and the
/// non-characters U+FFFE and U+FFFF), which escaping cannot make valid.
pub fn xml_text(text: &str) -> String {
    text.chars()
        .filter(|&c| {
            matches!(c, '\t' | '\n' | '\r')
                || !(c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}')
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_drops_what_xml_cannot_carry_and_keeps_the_rest() {
        assert_eq!(xml_text("a\u{1}b\u{FFFE}c\td\né<"), "abc\td\né<");
    }
}
