//! How a measurement's samples are stored: a compact, lossless binary encoding of the exact
//! f64 values, and the one type (`Samples`) through which every reader and writer of the
//! `measurements.samples` column goes.
//!
//! Samples used to be stored as JSON text (about 18 bytes a sample); this encoding keeps every
//! bit. Each sample is XORed with the one before it (the first with zero), as Gorilla does for
//! time series: samples of one measurement are close, so their sign, exponent and top mantissa
//! bits cancel, and integer-valued samples end in zero bytes. What is left is written as one
//! control byte (high nibble: leading zero bytes, low nibble: trailing zero bytes, together at
//! most 8) followed by the remaining middle bytes, most significant first. A repeated sample costs
//! one byte; an integer nanosecond count three or four; a sample with a full mantissa eight or
//! nine (a byte more than raw f64 at worst, against about 18 as JSON text).

use sqlx::sqlite::{Sqlite, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Type, TypeInfo, ValueRef};

/// Why stored bytes are not an encoding of samples.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplesError {
    #[error(
        "stored samples are corrupt: control byte {control:#04x} at byte {at} claims more than 8 zero bytes"
    )]
    BadControl { control: u8, at: usize },
    #[error("stored samples are truncated: sample at byte {at} needs {needed} bytes, {left} left")]
    Truncated {
        at: usize,
        needed: usize,
        left: usize,
    },
}

/// The encoding of `samples` (empty for no samples).
pub fn encode(samples: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 9);
    let mut previous = 0u64;
    for sample in samples {
        let bits = sample.to_bits();
        let xor = bits ^ previous;
        previous = bits;
        if xor == 0 {
            out.push(0x80);
            continue;
        }
        let leading = xor.leading_zeros() as usize / 8;
        let trailing = xor.trailing_zeros() as usize / 8;
        out.push(((leading as u8) << 4) | trailing as u8);
        out.extend_from_slice(&xor.to_be_bytes()[leading..8 - trailing]);
    }
    out
}

/// The samples `bytes` encode, exactly as they were given to [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Vec<f64>, SamplesError> {
    let mut samples = Vec::with_capacity(bytes.len() / 4);
    let mut previous = 0u64;
    let mut at = 0;
    while at < bytes.len() {
        let control = bytes[at];
        let (leading, trailing) = ((control >> 4) as usize, (control & 0x0f) as usize);
        if leading + trailing > 8 {
            return Err(SamplesError::BadControl { control, at });
        }
        let needed = 8 - leading - trailing;
        let middle = bytes
            .get(at + 1..at + 1 + needed)
            .ok_or(SamplesError::Truncated {
                at,
                needed,
                left: bytes.len() - at - 1,
            })?;
        let mut word = [0u8; 8];
        word[leading..8 - trailing].copy_from_slice(middle);
        previous ^= u64::from_be_bytes(word);
        samples.push(f64::from_bits(previous));
        at += 1 + needed;
    }
    Ok(samples)
}

/// A measurement's samples as read from the database (decoded from their stored bytes) and as
/// shown by the API (a JSON array of numbers).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// The samples, or the measurement's single value when the tool gave no samples.
    pub fn or_value(self, value: f64) -> Vec<f64> {
        if self.0.is_empty() {
            vec![value]
        } else {
            self.0
        }
    }
}

impl std::ops::Deref for Samples {
    type Target = [f64];

    fn deref(&self) -> &[f64] {
        &self.0
    }
}

impl Type<Sqlite> for Samples {
    fn type_info() -> SqliteTypeInfo {
        <Vec<u8> as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <Vec<u8> as Type<Sqlite>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Sqlite> for Samples {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        // Text here is a row the one-time conversion from JSON text has not reached: say so
        // rather than misreading JSON characters as control bytes.
        if value.type_info().name() == "TEXT" {
            return Err(
                "samples stored as JSON text: the database's samples conversion did not run".into(),
            );
        }
        let bytes = <&[u8] as Decode<Sqlite>>::decode(value)?;
        Ok(Samples(decode(bytes)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(samples: &[f64]) -> Vec<u8> {
        let bytes = encode(samples);
        let back = decode(&bytes).unwrap();
        let bits = |s: &[f64]| s.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(samples), "{samples:?}");
        bytes
    }

    #[test]
    fn every_bit_of_every_sample_comes_back() {
        round_trip(&[]);
        round_trip(&[0.0]);
        round_trip(&[-0.0, 0.0, -0.0]);
        round_trip(&[f64::MIN_POSITIVE, f64::MAX, f64::MIN, 5e-324, -5e-324]);
        round_trip(&[f64::INFINITY, f64::NEG_INFINITY, f64::NAN]);
        round_trip(&[992.2469488434278, 986.4030831480563, 989.7329122956687]);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2_000 {
            let samples: Vec<f64> = (0..(state % 12))
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1442695040888963407);
                    f64::from_bits(state)
                })
                .collect();
            round_trip(&samples);
        }
    }

    #[test]
    fn close_repeated_and_integer_samples_are_compact() {
        assert_eq!(round_trip(&[7.0, 7.0, 7.0]).len(), 3 + 2);
        // Integer nanosecond counts: their low mantissa bytes are zero.
        assert!(round_trip(&[400_000.0, 401_230.0, 399_871.0]).len() <= 12);
        // Full-entropy mantissas share sign, exponent and a few top bits: at most a byte a sample
        // more than raw f64, and less than half of the JSON text.
        let noisy = [
            992.2469488434278,
            986.4030831480563,
            989.7329122956687,
            999.5245184353574,
        ];
        assert!(round_trip(&noisy).len() <= 4 * 9);
        assert!(round_trip(&noisy).len() < serde_json::to_string(&noisy).unwrap().len() / 2);
    }

    #[test]
    fn hostile_bytes_give_a_clear_error() {
        assert_eq!(
            decode(&[0x90]),
            Err(SamplesError::BadControl {
                control: 0x90,
                at: 0
            })
        );
        assert_eq!(
            decode(&[0x00, 1, 2, 3]),
            Err(SamplesError::Truncated {
                at: 0,
                needed: 8,
                left: 3
            })
        );
        let mut cut = encode(&[1.5, 2.5]);
        cut.pop();
        assert!(matches!(decode(&cut), Err(SamplesError::Truncated { .. })));
        // JSON text read as bytes is not silently taken for samples.
        assert!(decode(b"[1.0,2.0]").is_err());
        let message = decode(&[0x55]).unwrap_err().to_string();
        assert!(message.contains("corrupt"), "{message}");
    }

    #[test]
    fn samples_are_shown_as_a_json_array() {
        let samples = Samples(vec![1.0, 2.5]);
        assert_eq!(serde_json::to_string(&samples).unwrap(), "[1.0,2.5]");
        assert_eq!(Samples(vec![]).or_value(3.0), vec![3.0]);
        assert_eq!(samples.clone().or_value(3.0), vec![1.0, 2.5]);
    }
}
