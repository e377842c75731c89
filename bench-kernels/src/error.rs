//! The crate's one error type.

use std::io;

/// Everything a kernel, a suite run or the report can fail with.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// An operating-system call failed; `context` says what we were doing.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// The variants file or a variant flag could not be understood.
    #[error("invalid variants: {0}")]
    Variants(String),
    /// A metrics store was asked for more series than its file was laid out for.
    #[error("metrics store is full: it holds {capacity} series")]
    StoreFull {
        /// Series the store was laid out for.
        capacity: usize,
    },
    /// Bytes on disk or on the wire do not follow the format.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The broker answered a produce request with an error, or not at all.
    #[error("broker: {0}")]
    Broker(String),
    /// A histogram could not record or serialize a value.
    #[error("histogram: {0}")]
    Histogram(String),
    /// A result would break the kymo JSON contract (bad name, non-finite number, empty metric).
    #[error("invalid result: {0}")]
    InvalidResult(String),
    /// A benchmark name that no suite knows.
    #[error("unknown benchmark: {0}")]
    UnknownBenchmark(String),
    /// A thread of a multi-threaded kernel panicked.
    #[error("a {0} thread panicked")]
    ThreadPanicked(&'static str),
}

/// Attaches what we were doing to an `io::Error`.
pub trait IoContext<T> {
    /// Wraps the error as [`KernelError::Io`] with `context`.
    fn io_context(self, context: &str) -> Result<T, KernelError>;
}

impl<T> IoContext<T> for Result<T, io::Error> {
    fn io_context(self, context: &str) -> Result<T, KernelError> {
        self.map_err(|source| KernelError::Io {
            context: context.to_string(),
            source,
        })
    }
}
