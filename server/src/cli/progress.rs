//! Progress on stderr for long CLI work, drawn only when stderr is a terminal so that scripts
//! and CI logs get clean output.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where progress goes: stderr when a person watches it, nowhere otherwise.
fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar over `len` steps, described by `what` (`parsing`, ...).
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let style = ProgressStyle::with_template("{spinner} {msg} {pos}/{len} [{bar:30}] {elapsed}")
        .expect("the template is valid")
        .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(len), target())
        .with_style(style)
        .with_message(what.to_owned())
}

/// A spinner for waiting on the server (a clone, an upload being analysed).
pub fn spinner(what: String) -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, target())
        .with_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid"))
        .with_message(what);
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}
