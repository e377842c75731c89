//! Exports for spreadsheets and scripts: the one `format=json|csv` choice every exporting
//! endpoint takes, CSV rendering, and the download response.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::AppError;

/// What an exporting endpoint answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Csv,
}

impl ExportFormat {
    /// Parses a `format` query parameter; absent means JSON.
    pub fn parse(format: Option<&str>) -> Result<Self, AppError> {
        match format {
            None | Some("json") => Ok(ExportFormat::Json),
            Some("csv") => Ok(ExportFormat::Csv),
            Some(other) => Err(AppError::BadRequest(format!(
                "format {other:?} is not json or csv"
            ))),
        }
    }
}

/// A CSV document (a string, or a streamed body) as a download named `filename` (which must
/// be plain ASCII without quotes).
pub fn csv_download(filename: &str, csv: impl Into<Body>) -> Response {
    let body: Body = csv.into();
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// Joins fields into one CSV line (with its newline); text fields must be [`csv_field`]s.
pub fn csv_line(fields: &[String]) -> String {
    let mut line = fields.join(",");
    line.push('\n');
    line
}

/// Quotes a CSV field, and defuses spreadsheet formulas (a leading `=`, `+`, `-` or `@`).
pub fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        assert_eq!(csv_field("line\nbreak"), "\"line\nbreak\"");
    }

    #[test]
    fn the_format_is_json_unless_csv_is_asked_and_anything_else_is_refused() {
        assert_eq!(ExportFormat::parse(None).unwrap(), ExportFormat::Json);
        assert_eq!(ExportFormat::parse(Some("csv")).unwrap(), ExportFormat::Csv);
        let err = ExportFormat::parse(Some("xml")).unwrap_err();
        assert!(err.to_string().contains("json or csv"), "{err}");
    }
}
