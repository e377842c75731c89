//! SQL functions of kymo's connections (the readers' and the writer's).
//!
//! `f64_bits(x)` hands a stored number to this process as the 64 bits of its IEEE 754 double,
//! spelled as an integer. SQLite spells a REAL in decimal only through its printf (`%!.20e`: double-double
//! arithmetic, 4 % of a benchmark page's time and of ingest's, whose merges read each staged
//! value), and its fifteen-digit default loses bits; an integer is spelled in a few
//! nanoseconds and read back to the bit ([`from_bits`]).
//!
//! `window_run(staged, series, commit, value, run, samples)` writes a run's line of a window
//! (`window_lines.rs`): the value as its bits, the samples in hex. Through printf (and
//! `f64_bits` and `hex`) the lines of a benchmark page's 5,000 runs were a tenth of the page.
//!
//! sqlx has no API for SQL functions, so this module calls SQLite's C interface on the
//! connection sqlx opened (`sqlite3_create_function_v2`), the one `unsafe` of the database
//! layer. Queries that call the functions are not checked by `cargo sqlx prepare` (it connects
//! without them) and are written with `sqlx::query_scalar`, not its macro.

use std::ffi::{c_int, c_void};

use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;

use super::window_lines::run_line;

/// The number the function spelled: its bits, read back as the double they are.
pub(super) fn from_bits(spelled: i64) -> f64 {
    f64::from_bits(spelled as u64)
}

/// Reads a number the function spelled, as a field of JSON.
pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(spelled: D) -> Result<f64, D::Error> {
    <i64 as serde::Deserialize>::deserialize(spelled).map(from_bits)
}

/// The `expected` arguments of a call, or `None` when SQLite passed another count.
///
/// # Safety
/// `values` points at `count` values that live as long as the call.
unsafe fn arguments<'a>(
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
    expected: usize,
) -> Option<&'a [*mut ffi::sqlite3_value]> {
    // SAFETY: as the caller promises, when the count is the one expected.
    (usize::try_from(count) == Ok(expected))
        .then(|| unsafe { std::slice::from_raw_parts(values, expected) })
}

/// `value` as a double when it is a number (an INTEGER converted as SQLite converts it);
/// `None` for anything else (text is not read as a number).
///
/// # Safety
/// `value` is an argument of the call being served.
unsafe fn number(value: *mut ffi::sqlite3_value) -> Option<f64> {
    // SAFETY: as the caller promises.
    unsafe {
        matches!(
            ffi::sqlite3_value_type(value),
            ffi::SQLITE_FLOAT | ffi::SQLITE_INTEGER
        )
        .then(|| ffi::sqlite3_value_double(value))
    }
}

/// `f64_bits(x)`: the bits of `x` as a double when `x` is a number, NULL for anything else.
unsafe extern "C" fn f64_bits(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls this with `count` valid values (1, as registered below) and a live
    // context, on the connection's own thread.
    unsafe {
        match arguments(count, values, 1).and_then(|values| number(values[0])) {
            Some(x) => ffi::sqlite3_result_int64(context, x.to_bits() as i64),
            None => ffi::sqlite3_result_null(context),
        }
    }
}

/// `window_run(staged, series, commit, value, run, samples)`: the run's line
/// ([`run_line`]); `samples` a blob, or NULL for none. NULL when `value` is not a number.
unsafe extern "C" fn window_run(
    context: *mut ffi::sqlite3_context,
    count: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite calls this with `count` valid values (6, as registered below) and a live
    // context, on the connection's own thread. A blob's bytes stay valid until the value is
    // next converted, which nothing here does; the line is copied by SQLite
    // (`SQLITE_TRANSIENT`) before it is dropped.
    unsafe {
        let Some((values, value)) =
            arguments(count, values, 6).and_then(|values| Some((values, number(values[3])?)))
        else {
            ffi::sqlite3_result_null(context);
            return;
        };
        let int = |i: usize| ffi::sqlite3_value_int64(values[i]);
        let blob = ffi::sqlite3_value_blob(values[5]).cast::<u8>();
        let samples = match usize::try_from(ffi::sqlite3_value_bytes(values[5])) {
            Ok(length) if !blob.is_null() => std::slice::from_raw_parts(blob, length),
            _ => &[],
        };
        let line = run_line(int(0) != 0, int(1), int(2), value, int(4), samples);
        ffi::sqlite3_result_text64(
            context,
            line.as_ptr().cast(),
            line.len() as u64,
            ffi::SQLITE_TRANSIENT(),
            ffi::SQLITE_UTF8 as u8,
        );
    }
}

/// The functions, their names and argument counts.
type Function =
    unsafe extern "C" fn(*mut ffi::sqlite3_context, c_int, *mut *mut ffi::sqlite3_value);
const FUNCTIONS: [(&std::ffi::CStr, c_int, Function); 2] =
    [(c"f64_bits", 1, f64_bits), (c"window_run", 6, window_run)];

/// Makes the functions callable on `connection`.
pub(super) async fn register(connection: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = connection.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    for (name, arguments, function) in FUNCTIONS {
        // SAFETY: `db` is the open connection sqlx holds locked for this call; the name is a
        // static C string; the functions keep no state (no user data, no destructor).
        let code = unsafe {
            ffi::sqlite3_create_function_v2(
                db,
                name.as_ptr(),
                arguments,
                ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC | ffi::SQLITE_INNOCUOUS,
                std::ptr::null_mut::<c_void>(),
                Some(function),
                None,
                None,
                None,
            )
        };
        if code != ffi::SQLITE_OK {
            return Err(sqlx::Error::Configuration(
                format!("SQLite refused the function {name:?} (code {code})").into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    async fn connection() -> SqliteConnection {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        register(&mut conn).await.unwrap();
        conn
    }

    #[tokio::test]
    async fn every_stored_number_comes_back_to_the_bit() {
        let mut conn = connection().await;
        sqlx::query("CREATE TABLE t (v REAL)")
            .execute(&mut conn)
            .await
            .unwrap();
        let values = [
            0.0, // (-0.0 is stored as the integer 0: SQLite keeps no sign of zero)
            1.0,
            -2.5,
            61_010.123_456_789,
            1e-300 * 1.000_000_014,  // printf's decimal missed its last bit
            f64::MIN_POSITIVE / 3.0, // subnormal
            f64::MAX,
            f64::MIN,
            123_456_789.0, // integral: SQLite stores it as an integer in a REAL column
            0.1 + 0.2,
        ];
        for v in values {
            sqlx::query("INSERT INTO t VALUES (?)")
                .bind(v)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        let spelled: Vec<String> =
            sqlx::query_scalar("SELECT f64_bits(v) || '' FROM t ORDER BY rowid")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let read: Vec<u64> = (spelled.iter())
            .map(|s| from_bits(s.parse().unwrap()).to_bits())
            .collect();
        let stored: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(read, stored);
    }

    #[tokio::test]
    async fn anything_but_a_number_is_null() {
        let mut conn = connection().await;
        let row: (Option<i64>, Option<i64>, Option<i64>, i64) =
            sqlx::query_as("SELECT f64_bits('1.5'), f64_bits(NULL), f64_bits(x'00'), f64_bits(3)")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(row.0, None, "text is not read as a number");
        assert_eq!((row.1, row.2), (None, None));
        assert_eq!(from_bits(row.3), 3.0);
        // The wrong number of arguments is SQLite's error, before the function runs.
        let err = sqlx::query("SELECT f64_bits(1, 2)")
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("f64_bits"), "{err}");
    }

    #[tokio::test]
    async fn a_run_is_written_as_its_window_line() {
        let mut conn = connection().await;
        let bits = (-2.5f64).to_bits() as i64;
        let lines: (String, String, String, Option<String>) = sqlx::query_as(
            "SELECT window_run(1, 7, 3, -2.5, 9, x'00FF7F'), window_run(0, 7, 3, 4, 9, NULL),
                    window_run(0, 1, 2, 0.5, 3, x''), window_run(0, 1, 2, 'text', 3, NULL)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(lines.0, format!("1 7 3 {bits} 9 00FF7F"));
        let four = 4f64.to_bits() as i64;
        assert_eq!(
            lines.1,
            format!("0 7 3 {four} 9 "),
            "an integer value is a double"
        );
        assert_eq!(lines.2, format!("0 1 2 {} 3 ", 0.5f64.to_bits() as i64));
        assert_eq!(lines.3, None, "text is not read as a number");
        let err = sqlx::query("SELECT window_run(1, 2, 3)")
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("window_run"), "{err}");
    }
}
