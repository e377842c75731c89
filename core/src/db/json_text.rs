//! Columns stored as text that the JSON API shows as arrays: a measurement's samples (a JSON
//! array kept as it was stored) and a commit's parents (space-separated shas).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};
use serde_json::value::RawValue;

/// A JSON array kept as text, written into the answer as the array itself (not re-parsed
/// into numbers: a series of thousands of points is copied, not rebuilt).
pub mod array {
    use super::*;

    pub fn serialize<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
        serde::Serialize::serialize(raw, serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        if !value.is_array() {
            return Err(D::Error::custom("expected an array"));
        }
        Ok(value.to_string())
    }
}

/// Space-separated words, shown as an array of strings.
pub mod words {
    use super::*;

    pub fn serialize<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(text.split_whitespace())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        Ok(Vec::<String>::deserialize(deserializer)?.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        #[serde(with = "super::array")]
        samples: String,
        #[serde(with = "super::words")]
        parents: String,
    }

    #[test]
    fn text_columns_are_shown_as_arrays_and_read_back() {
        let row = Row {
            samples: "[1.0,2.5,3]".into(),
            parents: "aa bb".into(),
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"samples":[1.0,2.5,3],"parents":["aa","bb"]}"#);
        let back: Row = serde_json::from_str(&json).unwrap();
        assert_eq!(back.parents, "aa bb");
        assert_eq!(back.samples, "[1.0,2.5,3]");
        let root = Row {
            samples: "[]".into(),
            parents: String::new(),
        };
        assert_eq!(
            serde_json::to_string(&root).unwrap(),
            r#"{"samples":[],"parents":[]}"#
        );
    }

    #[test]
    fn text_that_is_not_json_fails_to_serialize_instead_of_being_passed_through() {
        let row = Row {
            samples: "[1,".into(),
            parents: String::new(),
        };
        assert!(serde_json::to_string(&row).is_err());
        assert!(serde_json::from_str::<Row>(r#"{"samples":"[1]","parents":[]}"#).is_err());
    }
}
