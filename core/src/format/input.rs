//! What every tool-format parser does with its untrusted input: the size and UTF-8 checks, JSON
//! read within a nesting limit (errors name their place, see [`super::json_place`]), lists and
//! objects capped while they are read, and the closing checks that keep a parser's results
//! acceptable to `results::validate_suites`, each refusal naming where in the document the
//! benchmark came from.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::json_place::{PathStyle, from_json_text, line_column};
use super::kymo::{
    FormatError, MAX_BENCHMARKS, MAX_DOCUMENT_BYTES, MAX_METRICS_PER_BENCHMARK,
    MAX_PARAMS_PER_BENCHMARK,
};
use crate::model::Direction;
use crate::results::{BenchmarkResult, MAX_SAMPLES_PER_METRIC, MetricResult, SuiteResults};

// The server's limits (`results::validate_suites`), so that what parses here is stored there.
pub(crate) const MAX_BENCHMARK_NAME_BYTES: usize = 200;
pub(crate) const MAX_METRIC_NAME_BYTES: usize = 64;
pub(crate) const MAX_PARAM_NAME_BYTES: usize = 64;
pub(crate) const MAX_PARAM_VALUE_BYTES: usize = 200;
pub(crate) const MAX_UNIT_BYTES: usize = 32;

/// An error about a place in the document that is not a JSON syntax or type error.
pub(crate) fn invalid(place: impl Into<String>, reason: impl Into<String>) -> FormatError {
    FormatError::Invalid {
        place: place.into(),
        reason: reason.into(),
    }
}

/// The error for output that holds no results at all: empty, or text from something else.
pub(crate) fn no_results() -> FormatError {
    invalid("the output", "no benchmark results found")
}

/// Checks a document's size and encoding and returns it as text.
pub(crate) fn text_of(bytes: &[u8]) -> Result<&str, FormatError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(FormatError::TooLarge {
            size: bytes.len(),
            max: MAX_DOCUMENT_BYTES,
        });
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = line_column(bytes, e.valid_up_to());
        FormatError::NotUtf8 { line, column }
    })
}

/// Reads a JSON document into `T` after the size, encoding and nesting checks.
pub(crate) fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FormatError> {
    let text = text_of(bytes)?;
    if text.trim().is_empty() {
        return Err(no_results());
    }
    from_json_text(text, PathStyle::Quoted)
}

/// A number scaled to kymo's unit (`scale` = 1e9 turns seconds into ns), refused unless it is
/// finite and not negative: no tool measures a negative time, size or rate.
pub(crate) fn scaled(place: &str, what: &str, value: f64, scale: f64) -> Result<f64, FormatError> {
    let scaled = value * scale;
    if !scaled.is_finite() || scaled < 0.0 {
        let reason = format!("{what} is {value}; it must be a finite number, not negative");
        return Err(invalid(place, reason));
    }
    Ok(scaled)
}

/// A metric with its samples (possibly none) and its value.
pub(crate) fn metric(
    name: &str,
    unit: &str,
    direction: Direction,
    value: f64,
    samples: Vec<f64>,
) -> MetricResult {
    MetricResult {
        name: name.to_string(),
        unit: unit.to_string(),
        direction,
        value,
        samples,
        hdr: None,
    }
}

/// A benchmark read from the document, with the place it came from for messages.
pub(crate) struct Found {
    pub place: String,
    pub benchmark: BenchmarkResult,
}

/// The last checks of every parser: at least one and at most `MAX_BENCHMARKS` benchmarks, names
/// and units within the server's limits, finite numbers, and no benchmark or metric twice.
pub(crate) fn finish(found: Vec<Found>) -> Result<SuiteResults, FormatError> {
    if found.is_empty() {
        return Err(no_results());
    }
    if found.len() > MAX_BENCHMARKS {
        let reason = format!(
            "holds {} benchmarks; at most {MAX_BENCHMARKS} are accepted",
            found.len()
        );
        return Err(invalid("the output", reason));
    }
    let mut first_place = HashMap::new();
    let mut benchmarks = Vec::with_capacity(found.len());
    for Found { place, benchmark } in found {
        check_benchmark(&place, &benchmark)?;
        let key = benchmark.key();
        if let Some(first) = first_place.get(&key) {
            let reason = format!("benchmark {} was already found at {first}", shown(&key));
            return Err(invalid(place, reason));
        }
        first_place.insert(key, place);
        benchmarks.push(benchmark);
    }
    Ok(SuiteResults { benchmarks })
}

fn check_benchmark(place: &str, bench: &BenchmarkResult) -> Result<(), FormatError> {
    let fail = |reason: String| invalid(place, reason);
    check_text(
        "the benchmark name",
        &bench.name,
        MAX_BENCHMARK_NAME_BYTES,
        Echo::Quoted,
    )
    .map_err(fail)?;
    if bench.params.len() > MAX_PARAMS_PER_BENCHMARK {
        let reason = format!("has {} parameters", bench.params.len());
        return Err(fail(format!(
            "{reason}; at most {MAX_PARAMS_PER_BENCHMARK} are accepted"
        )));
    }
    for (key, value) in &bench.params {
        check_text("a parameter name", key, MAX_PARAM_NAME_BYTES, Echo::Quoted).map_err(fail)?;
        let what = format!("parameter {}", shown(key));
        check_text(&what, value, MAX_PARAM_VALUE_BYTES, Echo::Quoted).map_err(fail)?;
    }
    if bench.metrics.is_empty() || bench.metrics.len() > MAX_METRICS_PER_BENCHMARK {
        let reason = format!(
            "has {} metrics; a benchmark needs 1 to {MAX_METRICS_PER_BENCHMARK}",
            bench.metrics.len()
        );
        return Err(fail(reason));
    }
    let mut names = HashSet::new();
    for metric in &bench.metrics {
        check_text(
            "a metric name",
            &metric.name,
            MAX_METRIC_NAME_BYTES,
            Echo::Quoted,
        )
        .map_err(fail)?;
        let what = format!("metric {}", shown(&metric.name));
        if !names.insert(&metric.name) {
            return Err(fail(format!("{what} appears twice")));
        }
        if metric.unit.len() > MAX_UNIT_BYTES || metric.unit.chars().any(char::is_control) {
            let reason = format!("{what} has the unit {}", shown(&metric.unit));
            let limit = format!("at most {MAX_UNIT_BYTES} bytes without control characters");
            return Err(fail(format!("{reason}; a unit is {limit}")));
        }
        if metric.samples.len() > MAX_SAMPLES_PER_METRIC {
            let reason = format!("{what} has {} samples", metric.samples.len());
            let limit = format!("at most {MAX_SAMPLES_PER_METRIC} are accepted");
            return Err(fail(format!("{reason}; {limit}")));
        }
        let finite = metric.value.is_finite() && metric.samples.iter().all(|s| s.is_finite());
        if !finite {
            return Err(fail(format!("{what} is not a finite number")));
        }
    }
    Ok(())
}

/// How [`check_text`] words a refusal: tools' parsers quote the start of the text after what
/// it is, kymo's own parser names only what it is.
#[derive(Clone, Copy)]
pub(crate) enum Echo {
    /// Empty text is refused, and the start of the text is quoted.
    Quoted,
    /// Empty text is refused, and the text is not quoted.
    Bare,
    /// As `Bare`, but empty text is accepted.
    BareMayBeEmpty,
}

/// Checks a name or other text for emptiness, length in bytes and control characters.
pub(crate) fn check_text(what: &str, text: &str, max: usize, echo: Echo) -> Result<(), String> {
    if !matches!(echo, Echo::BareMayBeEmpty) && text.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    let subject = match echo {
        Echo::Quoted => format!("{what} {}", shown(text)),
        Echo::Bare | Echo::BareMayBeEmpty => what.to_string(),
    };
    if text.len() > max {
        return Err(format!(
            "{subject} is {} bytes; at most {max} are accepted",
            text.len()
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        let code = c as u32;
        return Err(format!(
            "{subject} contains the control character U+{code:04X}"
        ));
    }
    Ok(())
}

/// Quotes the start of untrusted text for a message, whatever its length.
pub(crate) fn shown(text: &str) -> String {
    const SHOWN_CHARS: usize = 40;
    let start: String = text.chars().take(SHOWN_CHARS).collect();
    if start.len() < text.len() {
        format!("{start:?}…")
    } else {
        format!("{start:?}")
    }
}

/// A struct read from a JSON object only: derived structs also accept a list of their fields
/// by position, which would let a mistaken list pass as a result.
pub(crate) struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// A JSON list of at most `N` items; a longer one is refused as soon as it is seen, so that a
/// hostile document cannot make the parser hold much more than the limit.
pub(crate) struct List<T, const N: usize>(pub Vec<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for List<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for ListVisitor<T, N> {
            type Value = List<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    if items.len() == N {
                        // Counted to the end, so that the error names the whole list.
                        let mut total = N + 1;
                        while seq.next_element::<IgnoredAny>()?.is_some() {
                            total += 1;
                        }
                        let reason =
                            format!("the list holds {total} items; at most {N} are accepted");
                        return Err(de::Error::custom(reason));
                    }
                    items.push(item);
                }
                Ok(List(items))
            }
        }
        deserializer.deserialize_seq(ListVisitor(PhantomData))
    }
}

/// A JSON object read as its entries in document order, at most `N` of them, each key once
/// (a map type would silently keep one of two equal keys).
pub(crate) struct Entries<T, const N: usize>(pub Vec<(String, T)>);

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Entries<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for EntriesVisitor<T, N> {
            type Value = Entries<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut entries, mut keys) = (Vec::new(), HashSet::new());
                while let Some(key) = map.next_key::<String>()? {
                    if entries.len() == N {
                        let mut total = N + 1;
                        map.next_value::<IgnoredAny>()?;
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                            total += 1;
                        }
                        let reason =
                            format!("the object holds {total} entries; at most {N} are accepted");
                        return Err(de::Error::custom(reason));
                    }
                    if !keys.insert(key.clone()) {
                        let reason = format!("the key {} appears twice", shown(&key));
                        return Err(de::Error::custom(reason));
                    }
                    entries.push((key, map.next_value()?));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// A parameter value in its canonical text form, or what was found instead of a scalar.
pub(crate) enum ParamValue {
    Text(String),
    Refused(&'static str),
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ParamVisitor;
        impl<'de> Visitor<'de> for ParamVisitor {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(v.to_string()))
            }
            // Rust's shortest round-trip form, so that `64`, `64.0` and `"64"` name one benchmark.
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ParamValue, E> {
                Ok(ParamValue::Refused("null"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ParamValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ParamValue::Refused("a list"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParamValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ParamValue::Refused("an object"))
            }
        }
        deserializer.deserialize_any(ParamVisitor)
    }
}
