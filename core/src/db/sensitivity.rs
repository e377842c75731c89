//! Stored sensitivity overrides, per repository and per benchmark-name prefix.

use super::{Db, DbError};
use crate::stats::{Sensitivity, SensitivityOverrides};

/// One stored override: `benchmark` is empty for the whole repository, otherwise a prefix of
/// the benchmark names it applies to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SensitivityRule {
    #[serde(default)]
    pub benchmark: String,
    pub overrides: SensitivityOverrides,
}

/// The sensitivity for `benchmark`: the defaults, then the repository's overrides, then those
/// of the longest matching benchmark prefix. Rules were validated when stored.
pub fn sensitivity_for(rules: &[SensitivityRule], benchmark: &str) -> Sensitivity {
    let base = Sensitivity::default();
    let repository = rules.iter().find(|r| r.benchmark.is_empty());
    let narrowest = rules
        .iter()
        .filter(|r| !r.benchmark.is_empty() && benchmark.starts_with(&r.benchmark))
        .max_by_key(|r| r.benchmark.len());
    [repository, narrowest]
        .into_iter()
        .flatten()
        .try_fold(base, |s, r| s.overridden_by(&r.overrides))
        .unwrap_or(base)
}

impl Db {
    /// Stores (or replaces) a rule after checking that it yields valid settings.
    pub async fn set_sensitivity(
        &self,
        repository_id: i64,
        rule: &SensitivityRule,
        now: i64,
    ) -> Result<(), DbError> {
        if rule.benchmark.len() > 200 || rule.benchmark.chars().any(char::is_control) {
            return Err(DbError::Invalid(
                "benchmark prefix must be at most 200 bytes".into(),
            ));
        }
        Sensitivity::default()
            .overridden_by(&rule.overrides)
            .map_err(|e| DbError::Invalid(e.to_string()))?;
        let overrides =
            serde_json::to_string(&rule.overrides).map_err(|e| DbError::Invalid(e.to_string()))?;
        let mut tx = self.begin_write().await?;
        sqlx::query!(
            r#"INSERT INTO sensitivity (repository_id, benchmark, overrides, updated_at)
               VALUES (?, ?, ?, ?)
               ON CONFLICT (repository_id, benchmark)
               DO UPDATE SET overrides = excluded.overrides, updated_at = excluded.updated_at"#,
            repository_id,
            rule.benchmark,
            overrides,
            now
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A repository's rules.
    pub async fn sensitivity_rules(
        &self,
        repository_id: i64,
    ) -> Result<Vec<SensitivityRule>, DbError> {
        let rows = sqlx::query!(
            "SELECT benchmark, overrides FROM sensitivity WHERE repository_id = ? ORDER BY benchmark",
            repository_id
        )
        .fetch_all(&self.reader)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let overrides = serde_json::from_str(&r.overrides).ok()?;
                Some(SensitivityRule {
                    benchmark: r.benchmark,
                    overrides,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(benchmark: &str, min_effect_pct: f64) -> SensitivityRule {
        SensitivityRule {
            benchmark: benchmark.into(),
            overrides: SensitivityOverrides {
                min_effect_pct: Some(min_effect_pct),
                ..SensitivityOverrides::default()
            },
        }
    }

    #[test]
    fn the_narrowest_matching_rule_wins_over_the_repositorys() {
        let rules = [rule("", 2.0), rule("bus/", 5.0), rule("bus/steady/", 10.0)];
        assert_eq!(sensitivity_for(&rules, "ring/record").min_effect_pct, 2.0);
        assert_eq!(sensitivity_for(&rules, "bus/bursty").min_effect_pct, 5.0);
        assert_eq!(
            sensitivity_for(&rules, "bus/steady/one").min_effect_pct,
            10.0
        );
        assert_eq!(
            sensitivity_for(&[], "x").min_effect_pct,
            Sensitivity::default().min_effect_pct
        );
    }
}
