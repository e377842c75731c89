//! What the demo shows of confirmation: it waits for the re-measurements its changes asked
//! for, and says what they found.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kymo_core::db::{RegressionFilter, RegressionRow, RepositoryRow};

use crate::state::AppState;

/// Waits until no change of the repository waits for its re-measurement.
pub(super) async fn wait_for_confirmations(
    state: &AppState,
    repository_id: i64,
) -> anyhow::Result<()> {
    let spinner = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("the template is valid"),
    );
    loop {
        let waiting = state.db.confirmations_waiting(repository_id).await?;
        if waiting == 0 {
            break;
        }
        spinner.set_message(format!(
            "confirming {waiting} change(s): measuring each suspect and its baseline again, alternately"
        ));
        spinner.tick();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    spinner.finish_and_clear();
    Ok(())
}

/// The changes the analysis found that confirmation did not refute.
pub(super) async fn standing_changes(
    state: &AppState,
    repo: &RepositoryRow,
) -> anyhow::Result<Vec<RegressionRow>> {
    let mut changes = state
        .db
        .regressions(repo.id, &RegressionFilter::default())
        .await?;
    changes.retain(|c| c.confirmation.as_deref() != Some("refuted"));
    Ok(changes)
}

/// Prints what confirmation did: changes confirmed (and how), refuted, left unconfirmed.
pub(super) async fn print_confirmations(
    state: &AppState,
    repo: &RepositoryRow,
) -> anyhow::Result<()> {
    let changes = state
        .db
        .regressions(repo.id, &RegressionFilter::default())
        .await?;
    let count = |wanted: &str| {
        (changes.iter())
            .filter(|c| c.confirmation.as_deref() == Some(wanted))
            .count()
    };
    let mut commits: Vec<&str> = (changes.iter())
        .filter(|c| c.confirmation.is_some())
        .map(|c| c.sha.as_str())
        .collect();
    commits.sort_unstable();
    commits.dedup();
    println!(
        "confirmation: {} change(s) at {} commit(s) measured again; confirmed {}, refuted {}, unconfirmed {}",
        changes.iter().filter(|c| c.confirmation.is_some()).count(),
        commits.len(),
        count("confirmed"),
        count("refuted"),
        count("unconfirmed"),
    );
    let refuted: Vec<&str> = (changes.iter())
        .filter(|c| c.confirmation.as_deref() == Some("refuted"))
        .map(|c| c.message.lines().next().unwrap_or_default())
        .collect();
    let mut refuted_commits = refuted.clone();
    refuted_commits.dedup();
    for message in refuted_commits {
        let n = refuted.iter().filter(|m| **m == message).count();
        println!("  refuted {n} change(s) at: {message}");
    }
    Ok(())
}
