//! What the trend graph draws over a series: its change points (linked to their regression
//! pages), the fitted levels between them with a noise band, and environment changes.

use kymo_core::db::{EnvironmentPoint, RegressionRow};
use kymo_core::stats::{CommitObservation, noise_model};

use crate::chart::{Annotation, BandPoint, ChangeMarker, MarkerKind, Segment, TrendPoint};

/// Everything drawn over one series.
#[derive(Debug, Default)]
pub struct Overlays {
    pub changes: Vec<ChangeMarker>,
    pub segments: Vec<Segment>,
    pub band: Vec<BandPoint>,
    pub annotations: Vec<Annotation>,
}

/// Builds the overlays of a series from the points drawn, its stored change points (any order)
/// and the environments of its runs in history order (a change between two neighbours is an
/// annotation). The band spans `noise` (a fraction of the level) each side, or the noise of
/// the points themselves when `None` (points drawn one by one, not summaries' extremes).
pub fn overlays(
    repo: &str,
    points: &[TrendPoint],
    regressions: &[&RegressionRow],
    environments: &[EnvironmentPoint],
    noise: Option<f64>,
) -> Overlays {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Overlays::default();
    };
    let mut changes: Vec<&&RegressionRow> = regressions
        .iter()
        .filter(|r| r.position.is_some())
        .collect();
    changes.sort_by_key(|r| r.position);

    let markers = changes
        .iter()
        .map(|r| ChangeMarker {
            position: r.position.unwrap_or_default() as usize,
            kind: if r.kind == "regression" {
                MarkerKind::Regression
            } else {
                MarkerKind::Improvement
            },
            label: format!("{:+.1} % {} at {}", r.change_pct, r.kind, &r.sha[..10]),
            href: Some(format!("/repos/{repo}/regressions/{}", r.id)),
        })
        .collect();

    // Levels: before the first change its baseline, after each change its new level.
    let mut segments = Vec::new();
    let mut from = first.position as i64;
    let mut level = changes.first().map(|r| r.baseline);
    for r in &changes {
        let at = r.position.unwrap_or_default();
        if let Some(level) = level.filter(|_| at > from) {
            segments.push(Segment {
                from: from as usize,
                to: (at - 1) as usize,
                level,
            });
        }
        from = at;
        level = Some(r.value);
    }
    if let Some(level) = level {
        segments.push(Segment {
            from: from as usize,
            to: last.position,
            level,
        });
    }

    let noise = noise.unwrap_or_else(|| {
        let observations: Vec<CommitObservation> = points
            .iter()
            .map(|p| CommitObservation {
                position: p.position,
                value: p.value,
                samples: Vec::new(),
            })
            .collect();
        noise_model(&observations).between_commit_pct / 100.0
    });
    let band = segments
        .iter()
        .flat_map(|s| {
            let spread = (s.level * noise * 2.0).abs();
            points
                .iter()
                .filter(move |p| (s.from..=s.to).contains(&p.position))
                .map(move |p| BandPoint {
                    position: p.position,
                    low: s.level - spread,
                    high: s.level + spread,
                })
        })
        .collect();

    let annotations = environments
        .windows(2)
        .filter_map(|w| {
            let (before, after) = (&w[0], &w[1]);
            let mut what = Vec::new();
            if before.toolchain != after.toolchain {
                what.push(format!(
                    "toolchain {} → {}",
                    before.toolchain, after.toolchain
                ));
            }
            if before.kernel != after.kernel {
                what.push(format!("kernel {} → {}", before.kernel, after.kernel));
            }
            (!what.is_empty()).then(|| Annotation {
                position: after.position as usize,
                label: what.join("; "),
            })
        })
        .collect();

    Overlays {
        changes: markers,
        segments,
        band,
        annotations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(position: usize, value: f64) -> TrendPoint {
        TrendPoint {
            position,
            sha: format!("{position:040x}"),
            value,
            low: None,
            high: None,
            committed_at: None,
        }
    }

    #[test]
    fn environment_changes_become_annotations_where_they_happen() {
        let env = |position, toolchain: &str| EnvironmentPoint {
            position,
            kernel: "6.1".into(),
            toolchain: toolchain.into(),
        };
        let points: Vec<TrendPoint> = (0..4).map(|i| point(i, 1.0)).collect();
        let o = overlays(
            "r",
            &points,
            &[],
            &[env(0, "1.94"), env(1, "1.94"), env(2, "1.95")],
            None,
        );
        assert_eq!(o.annotations.len(), 1);
        assert_eq!(o.annotations[0].position, 2);
        assert!(o.annotations[0].label.contains("1.94 → 1.95"));
        assert!(o.segments.is_empty() && o.changes.is_empty());
    }
}
