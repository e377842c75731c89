//! Alert messages, built from a regression's facts: pure functions, one per channel kind.
//!
//! Every body is a `serde_json::Value` built with serde; the text inside it escapes what the
//! receiving chat treats as markup, so a benchmark named `<!channel>` or `@everyone` is shown,
//! not obeyed.

use serde::Serialize;
use serde_json::{Value, json};

use crate::pages::format::value;

/// Longest benchmark, metric or machine name put into a message; longer ones are cut.
const MAX_NAME_CHARS: usize = 200;

/// Discord's `color` for a regression (a muted red).
const DISCORD_RED: u32 = 0xC0392B;

/// Where the regression came from: one commit, or a range of commits none of which is
/// pinned yet (bisection has not narrowed it down).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Culprit {
    Commit {
        sha: String,
        summary: String,
    },
    /// The commits after `last_good` up to and including `first_bad`.
    Range {
        last_good: String,
        first_bad: String,
        commits: i64,
    },
}

/// Everything a message says about one regression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertFacts {
    pub regression_id: i64,
    pub repository: String,
    pub benchmark: String,
    pub metric: String,
    pub unit: String,
    pub machine: String,
    pub change_pct: f64,
    pub baseline: f64,
    pub value: f64,
    pub confidence: Confidence,
    /// `confirmed` (measured again, or instruction counts moved), `unconfirmed` (nothing
    /// could measure it again), or `None` (confirmation is off).
    pub confirmation: Option<String>,
    pub culprit: Culprit,
    pub regression_url: String,
    pub compare_url: String,
}

/// The statistics behind the verdict, as stored with the regression.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Confidence {
    pub p_value: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
}

/// Other regressions of the same commit named in one message, worst first: a commit that slows
/// a benchmark usually moves several of its metrics (and often other benchmarks), and a chat
/// with one message per metric is a chat people mute.
const ALSO_NAMED: usize = 10;

/// The generic JSON body (kind `json`), documented in `docs/ALERTS.md`.
#[derive(Serialize)]
struct JsonAlert<'a> {
    event: &'static str,
    summary: String,
    #[serde(flatten)]
    facts: &'a AlertFacts,
    also: Vec<AlsoRegressed<'a>>,
}

/// Another regression at the same culprit, as the JSON body lists it under `also`.
#[derive(Serialize)]
struct AlsoRegressed<'a> {
    regression_id: i64,
    benchmark: &'a str,
    metric: &'a str,
    machine: &'a str,
    change_pct: f64,
    regression_url: &'a str,
}

/// The body to POST to a channel of `kind` (`json`, `slack` or `discord`) about the regression
/// `facts` and the other regressions `also` found at the same culprit (each has its own page;
/// the message names them so one commit makes one message).
pub fn alert_body(kind: &str, facts: &AlertFacts, also: &[AlertFacts]) -> Value {
    match kind {
        "slack" => slack_body(facts, also),
        "discord" => discord_body(facts, also),
        _ => serde_json::to_value(JsonAlert {
            event: "regression",
            summary: summary_line(facts, also.len(), &|s| s.to_owned()),
            facts,
            also: also
                .iter()
                .map(|a| AlsoRegressed {
                    regression_id: a.regression_id,
                    benchmark: &a.benchmark,
                    metric: &a.metric,
                    machine: &a.machine,
                    change_pct: a.change_pct,
                    regression_url: &a.regression_url,
                })
                .collect(),
        })
        .unwrap_or(Value::Null),
    }
}

/// The other regressions as lines of `• name metric +x %`, linked by `link(url, text)`, at most
/// [`ALSO_NAMED`] and a count of the rest.
fn also_lines(
    also: &[AlertFacts],
    escape: &dyn Fn(&str) -> String,
    link: &dyn Fn(&str, &str) -> String,
) -> String {
    let mut lines: Vec<String> = also
        .iter()
        .take(ALSO_NAMED)
        .map(|a| {
            let name = format!(
                "{} {}",
                escape(&one_line(&a.benchmark)),
                escape(&one_line(&a.metric))
            );
            format!("• {} {}", link(&a.regression_url, &name), change(a))
        })
        .collect();
    if also.len() > ALSO_NAMED {
        lines.push(format!("… and {} more", also.len() - ALSO_NAMED));
    }
    lines.join("\n")
}

/// `+12.3 %`
fn change(facts: &AlertFacts) -> String {
    format!("{:+.1} %", facts.change_pct)
}

/// `+20.0 % (100.0 ns → 120.0 ns)`, the unit escaped (it comes from benchmark output).
fn change_from_to(facts: &AlertFacts, escape: &dyn Fn(&str) -> String) -> String {
    let unit = one_line(&facts.unit);
    format!(
        "{} ({} → {})",
        change(facts),
        escape(&value(facts.baseline, &unit)),
        escape(&value(facts.value, &unit))
    )
}

/// `p = 0.0012, interval +10.1 % … +14.0 %`
fn confidence(facts: &AlertFacts) -> String {
    let c = facts.confidence;
    format!(
        "p = {:.2e}, interval {:+.1} % … {:+.1} %",
        c.p_value, c.ci_low_pct, c.ci_high_pct
    )
}

fn culprit_text(culprit: &Culprit, escape: &dyn Fn(&str) -> String) -> String {
    match culprit {
        Culprit::Commit { sha, summary } => {
            format!("{} {}", short(sha), escape(&one_line(summary)))
        }
        Culprit::Range {
            last_good,
            first_bad,
            commits,
        } => format!(
            "one of {commits} commits {}..{} (not bisected)",
            short(last_good),
            short(first_bad)
        ),
    }
}

/// One line saying it all, with names escaped by `escape`; `more` other regressions at the same
/// culprit are counted.
fn summary_line(facts: &AlertFacts, more: usize, escape: &dyn Fn(&str) -> String) -> String {
    let unconfirmed = if facts.confirmation.as_deref() == Some("unconfirmed") {
        " (unconfirmed: it could not be measured again)"
    } else {
        ""
    };
    let more = match more {
        0 => String::new(),
        1 => ", and 1 more regression at the same commit".to_owned(),
        n => format!(", and {n} more regressions at the same commit"),
    };
    format!(
        "Regression in {}: {} {} {} on machine {}{unconfirmed}{more}",
        escape(&facts.repository),
        escape(&one_line(&facts.benchmark)),
        escape(&one_line(&facts.metric)),
        change(facts),
        escape(&one_line(&facts.machine)),
    )
}

fn slack_body(facts: &AlertFacts, also: &[AlertFacts]) -> Value {
    let e = |s: &str| slack_escape(s);
    let field = |name: &str, value: String| json!({ "type": "mrkdwn", "text": format!("*{name}*\n{value}") });
    let summary = summary_line(facts, also.len(), &e);
    let mut body = json!({
        "text": summary,
        "blocks": [
            { "type": "section", "text": { "type": "mrkdwn", "text": format!("*{summary}*") } },
            { "type": "section", "fields": [
                field("Benchmark", e(&one_line(&facts.benchmark))),
                field("Metric", format!("{} ({})", e(&one_line(&facts.metric)), e(&one_line(&facts.unit)))),
                field("Change", change_from_to(facts, &e)),
                field("Confidence", confidence(facts)),
                field("Machine", e(&one_line(&facts.machine))),
                field("Culprit", culprit_text(&facts.culprit, &e)),
            ]},
            { "type": "section", "text": { "type": "mrkdwn", "text": format!(
                "<{}|Regression #{}> · <{}|Compare>", facts.regression_url, facts.regression_id, facts.compare_url) } }
        ]
    });
    if !also.is_empty() {
        let lines = also_lines(also, &e, &|url, text| format!("<{url}|{text}>"));
        // A section's text holds at most 3,000 characters.
        let text = cut(&format!("*Also at this commit*\n{lines}"), 2900);
        if let Some(blocks) = body["blocks"].as_array_mut() {
            blocks.push(json!({ "type": "section", "text": { "type": "mrkdwn", "text": text } }));
        }
    }
    body
}

fn discord_body(facts: &AlertFacts, also: &[AlertFacts]) -> Value {
    let e = |s: &str| discord_escape(s);
    let field = |name: &str, value: String, inline: bool| json!({ "name": name, "value": cut(&value, 1000), "inline": inline });
    let mut body = json!({
        "content": cut(&summary_line(facts, also.len(), &e), 1900),
        // Names come from benchmark output: never let them ping anyone.
        "allowed_mentions": { "parse": [] },
        "embeds": [{
            "title": cut(&format!("Regression #{} in {}", facts.regression_id, e(&facts.repository)), 250),
            "url": facts.regression_url,
            "color": DISCORD_RED,
            "fields": [
                field("Benchmark", e(&one_line(&facts.benchmark)), false),
                field("Metric", format!("{} ({})", e(&one_line(&facts.metric)), e(&one_line(&facts.unit))), true),
                field("Change", change_from_to(facts, &e), true),
                field("Confidence", confidence(facts), true),
                field("Machine", e(&one_line(&facts.machine)), true),
                field("Culprit", culprit_text(&facts.culprit, &e), false),
                field("Links", format!("[Regression]({}) · [Compare]({})", facts.regression_url, facts.compare_url), false),
            ]
        }]
    });
    if !also.is_empty() {
        let lines = also_lines(also, &e, &|url, text| format!("[{text}]({url})"));
        if let Some(fields) = body["embeds"][0]["fields"].as_array_mut() {
            fields.push(field("Also at this commit", lines, false));
        }
    }
    body
}

/// Slack's three control characters, as its formatting reference asks.
pub fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Discord markdown's special characters, each behind a backslash.
pub fn discord_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '*'
                | '_'
                | '~'
                | '`'
                | '|'
                | '>'
                | '<'
                | '['
                | ']'
                | '('
                | ')'
                | '#'
                | '@'
                | ':'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A name on one line (control characters become spaces), cut to a readable length.
fn one_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(&line, MAX_NAME_CHARS)
}

/// At most `max` characters, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(benchmark: &str, culprit: Culprit) -> AlertFacts {
        AlertFacts {
            regression_id: 7,
            repository: "r".into(),
            benchmark: benchmark.into(),
            metric: "time".into(),
            unit: "ns".into(),
            machine: "fp1".into(),
            change_pct: 20.04,
            baseline: 100.0,
            value: 120.0,
            confidence: Confidence {
                p_value: 0.00012,
                ci_low_pct: 18.5,
                ci_high_pct: 21.5,
            },
            confirmation: Some("confirmed".into()),
            culprit,
            regression_url: "https://kymo.example/repos/r/regressions/7".into(),
            compare_url: "https://kymo.example/repos/r/compare/aaa...bbb".into(),
        }
    }

    fn commit() -> Culprit {
        Culprit::Commit {
            sha: "b".repeat(40),
            summary: "make parse slower".into(),
        }
    }

    #[test]
    fn one_message_names_the_other_regressions_of_its_commit() {
        let others: Vec<AlertFacts> = (0..12)
            .map(|i| AlertFacts {
                regression_id: 100 + i,
                metric: format!("latency_p{i}"),
                regression_url: format!("https://kymo.example/repos/r/regressions/{}", 100 + i),
                ..facts("<ring>", commit())
            })
            .collect();
        let body = alert_body("json", &facts("parse", commit()), &others);
        assert_eq!(
            body["also"].as_array().unwrap().len(),
            12,
            "JSON lists them all"
        );
        assert_eq!(body["also"][0]["regression_id"], 100);
        assert_eq!(body["also"][0]["benchmark"], "<ring>");
        assert!(
            body["summary"]
                .as_str()
                .unwrap()
                .ends_with("and 12 more regressions at the same commit"),
            "{body}"
        );
        let slack = alert_body("slack", &facts("parse", commit()), &others);
        let also = slack["blocks"].as_array().unwrap().last().unwrap()["text"]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            also.contains(
                "<https://kymo.example/repos/r/regressions/100|&lt;ring&gt; latency_p0> +20.0 %"
            ),
            "{also}"
        );
        assert!(also.ends_with("… and 2 more"), "chats name ten: {also}");
        let discord = alert_body("discord", &facts("parse", commit()), &others[..1]);
        let fields = discord["embeds"][0]["fields"].as_array().unwrap();
        assert_eq!(fields.last().unwrap()["name"], "Also at this commit");
        assert!(
            fields.last().unwrap()["value"]
                .as_str()
                .unwrap()
                .contains(r"\<ring\>")
        );
        let alone = alert_body("json", &facts("parse", commit()), &[]);
        assert_eq!(alone["also"], json!([]));
        assert!(!alone["summary"].as_str().unwrap().contains("more"));
    }

    #[test]
    fn the_json_body_carries_every_fact() {
        let body = alert_body("json", &facts("parse", commit()), &[]);
        assert_eq!(body["event"], "regression");
        assert_eq!(body["repository"], "r");
        assert_eq!(body["benchmark"], "parse");
        assert_eq!(body["machine"], "fp1");
        assert_eq!(body["change_pct"], 20.04);
        assert_eq!(body["confidence"]["p_value"], 0.00012);
        assert_eq!(body["culprit"]["type"], "commit");
        assert_eq!(body["culprit"]["sha"], "b".repeat(40));
        assert_eq!(
            body["compare_url"],
            "https://kymo.example/repos/r/compare/aaa...bbb"
        );
        assert!(
            body["summary"].as_str().unwrap().contains("+20.0 %"),
            "{body}"
        );
    }

    #[test]
    fn a_range_is_named_when_there_is_no_single_culprit() {
        let range = Culprit::Range {
            last_good: "a".repeat(40),
            first_bad: "c".repeat(40),
            commits: 4,
        };
        let body = alert_body("json", &facts("parse", range.clone()), &[]);
        assert_eq!(body["culprit"]["type"], "range");
        assert_eq!(body["culprit"]["commits"], 4);
        let slack = alert_body("slack", &facts("parse", range), &[]).to_string();
        assert!(
            slack.contains("one of 4 commits aaaaaaaaaa..cccccccccc"),
            "{slack}"
        );
    }

    #[test]
    fn slack_gets_text_blocks_and_escaped_names() {
        let body = alert_body("slack", &facts("<!channel> & <b>", commit()), &[]);
        let text = body["text"].as_str().unwrap();
        assert!(text.contains("&lt;!channel&gt; &amp; &lt;b&gt;"), "{text}");
        assert!(!body.to_string().contains("<!channel>"));
        let blocks = body["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "section");
        let links = blocks[2]["text"]["text"].as_str().unwrap();
        assert!(links.contains("<https://kymo.example/repos/r/regressions/7|Regression #7>"));
        assert!(body.to_string().contains("p = 1.20e-4"), "{body}");
        assert!(
            body.to_string().contains("+20.0 % (100 ns → 120 ns)"),
            "{body}"
        );
    }

    #[test]
    fn discord_gets_an_embed_escaped_markdown_and_no_pings() {
        let body = alert_body(
            "discord",
            &facts("@everyone **x** [y](http://evil)\nz", commit()),
            &[],
        );
        assert_eq!(body["allowed_mentions"]["parse"], json!([]));
        let content = body["content"].as_str().unwrap();
        assert!(
            content.contains(r"\@everyone \*\*x\*\* \[y\]\(http\:"),
            "{content}"
        );
        assert!(!content.contains('\n'));
        let embed = &body["embeds"][0];
        assert_eq!(embed["url"], "https://kymo.example/repos/r/regressions/7");
        assert_eq!(embed["fields"][0]["name"], "Benchmark");
        assert!(embed["fields"].as_array().unwrap().len() <= 25);
    }

    #[test]
    fn long_names_are_cut_to_fit_the_chats_limits() {
        let body = alert_body("discord", &facts(&"x".repeat(10_000), commit()), &[]);
        assert!(body["content"].as_str().unwrap().chars().count() <= 2000);
        for field in body["embeds"][0]["fields"].as_array().unwrap() {
            assert!(field["value"].as_str().unwrap().chars().count() <= 1024);
        }
        let slack = alert_body("slack", &facts(&"y".repeat(10_000), commit()), &[]);
        assert!(slack["text"].as_str().unwrap().chars().count() < 400);
    }
}
