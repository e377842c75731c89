//! Where in a JSON document something went wrong: a byte-level walk that names the JSON path
//! (`results[3].times[2]`, `["a.b"].latency`) of any offset, checks nesting before serde_json
//! recurses, and turns serde_json's errors into messages with that path, line and column.

use std::ops::Range;

use serde::de::DeserializeOwned;

use super::kymo::{FormatError, MAX_NESTING_DEPTH};

/// How a path spells object keys. Tools' documents have keys of any text, so odd ones are
/// quoted; kymo's own format has plain keys, and its golden messages write each after a dot.
#[derive(Clone, Copy)]
pub(crate) enum PathStyle {
    /// `a.b["c d"]`: plain keys after a dot, others quoted in brackets.
    Quoted,
    /// `a.b.c d`: every key after a dot, control characters replaced.
    Dotted,
}

/// Reads JSON text into `T`, checking the nesting limit first: serde_json recurses up to 128
/// levels, so the limit is checked without recursion before it starts.
pub(crate) fn from_json_text<T: DeserializeOwned>(
    text: &str,
    style: PathStyle,
) -> Result<T, FormatError> {
    let walk = walk(text, text.len());
    if let Some(at) = walk.too_deep_at {
        let (line, column) = line_column(text.as_bytes(), at);
        return Err(FormatError::Json {
            place: walk.path(text, style),
            line,
            column,
            reason: format!("nested deeper than {MAX_NESTING_DEPTH} levels"),
        });
    }
    serde_json::from_str(text).map_err(|e| json_error(text, &e, style))
}

/// Turns a serde_json error into one naming the JSON path, and explains the non-numbers
/// (`NaN`, `Infinity`) that Python's `json` module and some C++ writers emit.
fn json_error(text: &str, error: &serde_json::Error, style: PathStyle) -> FormatError {
    let (line, column) = (error.line(), error.column());
    let read = bytes_read(text, line, column);
    let message = error.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = message.strip_suffix(&suffix).unwrap_or(&message);
    let reason = match (error.classify(), non_number_at(text, read)) {
        (serde_json::error::Category::Data, _) => message.to_string(),
        (_, Some(word)) => format!("{word} is not a JSON number; values must be finite"),
        // 1e999 is valid JSON, but not a finite f64.
        (_, None) if message == "number out of range" => {
            format!("{message}; values must be finite")
        }
        (_, None) => format!("not valid JSON: {message}"),
    };
    // serde quotes the offending string whole; a hostile one can be megabytes.
    const MAX_REASON_CHARS: usize = 300;
    let reason = match reason.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &reason[..cut]),
        None => reason,
    };
    FormatError::Json {
        place: walk(text, read).path(text, style),
        line,
        column,
        reason,
    }
}

/// The non-number serde_json stopped at, if any; `read` includes its first byte.
fn non_number_at(text: &str, read: usize) -> Option<&'static str> {
    let at = read.checked_sub(1)?;
    let rest = text.as_bytes().get(at..)?;
    if rest.starts_with(b"NaN") {
        Some("NaN")
    } else if rest.starts_with(b"Infinity") {
        let negative = at > 0 && text.as_bytes()[at - 1] == b'-';
        Some(if negative { "-Infinity" } else { "Infinity" })
    } else {
        None
    }
}

/// 1-based line and column of the byte at `offset`, columns in bytes as serde_json counts them.
pub(crate) fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    (line, before.len() - line_start + 1)
}

/// How many bytes serde_json had read when it reported `line` and `column` (its column counts
/// the bytes read on that line).
fn bytes_read(text: &str, line: usize, column: usize) -> usize {
    let bytes = text.as_bytes();
    let line_start = match line {
        0 | 1 => 0,
        _ => (bytes.iter().enumerate().filter(|(_, b)| **b == b'\n'))
            .nth(line - 2)
            .map_or(bytes.len(), |(i, _)| i + 1),
    };
    (line_start + column).min(bytes.len())
}

/// Where a byte-level walk through JSON text ended: the open arrays and objects, each with the
/// member being read. The walk needs no recursion and does not trust the text to be valid.
struct Walk {
    frames: Vec<Frame>,
    too_deep_at: Option<usize>,
}

struct Frame {
    object: bool,
    expect_key: bool,
    member: Option<Member>,
}

enum Member {
    Key(Range<usize>),
    Index(usize),
}

/// Walks the first `len` bytes of `text`, stopping at a bracket nested too deep.
fn walk(text: &str, len: usize) -> Walk {
    let mut frames: Vec<Frame> = Vec::new();
    // Inside a string: `Some(Some(start))` for an object key, `Some(None)` for a value.
    let mut string: Option<Option<usize>> = None;
    let mut escaped = false;
    for (i, &b) in text.as_bytes().iter().enumerate().take(len) {
        if let Some(key_start) = string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                string = None;
                if let (Some(start), Some(frame)) = (key_start, frames.last_mut()) {
                    frame.member = Some(Member::Key(start..i));
                    frame.expect_key = false;
                }
            }
            continue;
        }
        match b {
            b'"' => {
                let is_key = frames.last().is_some_and(|f| f.object && f.expect_key);
                string = Some(is_key.then_some(i + 1));
            }
            b'{' | b'[' if frames.len() == MAX_NESTING_DEPTH => {
                return Walk {
                    frames,
                    too_deep_at: Some(i),
                };
            }
            b'{' | b'[' => frames.push(Frame {
                object: b == b'{',
                expect_key: true,
                member: (b == b'[').then_some(Member::Index(0)),
            }),
            b'}' | b']' => {
                frames.pop();
            }
            b',' => match frames.last_mut() {
                Some(frame) if frame.object => frame.expect_key = true,
                Some(Frame {
                    member: Some(Member::Index(n)),
                    ..
                }) => *n += 1,
                _ => {}
            },
            _ => {}
        }
    }
    Walk {
        frames,
        too_deep_at: None,
    }
}

impl Walk {
    /// The JSON path of the innermost value, like `results[3].times` or `["a.b"].latency`.
    fn path(&self, text: &str, style: PathStyle) -> String {
        const MAX_PATH_BYTES: usize = 160;
        const MAX_KEY_CHARS: usize = 40;
        let mut path = String::new();
        for member in self.frames.iter().filter_map(|f| f.member.as_ref()) {
            if path.len() > MAX_PATH_BYTES {
                path.push('…');
                break;
            }
            match member {
                Member::Key(range) => {
                    let key = text[range.clone()].chars().take(MAX_KEY_CHARS);
                    push_key(&mut path, key.collect(), style);
                }
                Member::Index(n) => path.push_str(&format!("[{n}]")),
            }
        }
        if path.is_empty() {
            "the document".to_string()
        } else {
            path
        }
    }
}

fn push_key(path: &mut String, key: String, style: PathStyle) {
    let plain = match style {
        PathStyle::Quoted => {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        }
        PathStyle::Dotted => true,
    };
    if !plain {
        path.push_str(&format!("[{key:?}]"));
        return;
    }
    if !path.is_empty() {
        path.push('.');
    }
    path.extend(
        key.chars()
            .map(|c| if c.is_control() { '\u{fffd}' } else { c }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_at(text: &str, marker: char) -> String {
        let at = text.find(marker).expect("a marker");
        walk(text, at).path(text, PathStyle::Quoted)
    }

    #[test]
    fn paths_name_keys_indexes_and_odd_keys() {
        assert_eq!(path_at(r#"{"a":[1,{"b":@}]}"#, '@'), "a[1].b");
        assert_eq!(
            path_at(r#"{"a.b":{"c d":[0,0,@]}}"#, '@'),
            r#"["a.b"]["c d"][2]"#
        );
        assert_eq!(path_at(r#"{"a":1,"b":@}"#, '@'), "b");
        assert_eq!(path_at("@", '@'), "the document");
    }

    #[test]
    fn strings_do_not_move_the_walk() {
        // Brackets, commas and escaped quotes inside strings are text, not structure.
        let text = r#"{"a":"[{,\"]","b":[",",@]}"#;
        assert_eq!(path_at(text, '@'), "b[1]");
        let deep = format!(r#"{{"a":"{}"}}"#, "[".repeat(500));
        assert_eq!(walk(&deep, deep.len()).too_deep_at, None);
    }

    #[test]
    fn nesting_stops_at_the_limit() {
        let deep = "[".repeat(MAX_NESTING_DEPTH + 1);
        assert_eq!(walk(&deep, deep.len()).too_deep_at, Some(MAX_NESTING_DEPTH));
    }

    #[test]
    fn lines_and_columns_count_bytes_from_one() {
        assert_eq!(line_column(b"ab\ncd", 0), (1, 1));
        assert_eq!(line_column(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nx".as_bytes(), 3), (2, 1));
    }
}
