//! Columns stored as text that the JSON API shows as arrays: a commit's parents
//! (space-separated shas).

use serde::{Deserialize, Deserializer, Serializer};

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
        #[serde(with = "super::words")]
        parents: String,
    }

    #[test]
    fn parents_are_shown_as_an_array_and_read_back() {
        let row = Row {
            parents: "aa bb".into(),
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"parents":["aa","bb"]}"#);
        let back: Row = serde_json::from_str(&json).unwrap();
        assert_eq!(back.parents, "aa bb");
        let root = Row {
            parents: String::new(),
        };
        assert_eq!(serde_json::to_string(&root).unwrap(), r#"{"parents":[]}"#);
        assert!(serde_json::from_str::<Row>(r#"{"parents":"aa"}"#).is_err());
    }
}
