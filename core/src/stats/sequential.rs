//! The sequential verdict of interleaved rounds: a head and its base measured alternately on
//! one machine, looked at after some rounds and stopped as soon as each benchmark is decided.
//!
//! The unit of evidence is the **round**: each round runs the base and then the head, so the
//! difference of their locations, `d = ln(head / base)`, carries the change plus how much two
//! runs minutes apart differ on this machine, and nothing of the drift between rounds. The
//! differences of `n` rounds are judged by a paired t statistic of their trimmed mean (see
//! [`Look`]): the rounds' own noise, not a history's, and not one disturbed round's.
//!
//! Looking again after every few rounds and stopping at the first significant look would
//! inflate false alarms (five looks at 1 % each give up to 5 %). So the false-alarm rate α is
//! **spent** over the looks by a Pocock-type spending function, α·ln(1 + (e − 1)·t) with
//! t = rounds / the plan's most rounds (Lan and DeMets), and each look tests at the part of α
//! it was given. By the union bound the chance of any false alarm over all looks is at most α,
//! whatever the correlation between looks, whenever the comparison stops: the budget can end it
//! at any round without touching that guarantee (unspent α is simply not used). Exact
//! group-sequential boundaries would stop a little sooner; the union bound needs no numerical
//! integration and holds for t statistics of any degrees of freedom.
//!
//! A benchmark is decided when its interval at the look excludes zero (a change, if at least
//! the plan's smallest effect), or when its equivalence interval (two one-sided tests, with
//! their own error rate spent the same way) lies inside ±margin: **unchanged**. Whatever is
//! undecided when the rounds end is `inconclusive`, never `no_change`. Every verdict states
//! the change it could have seen: the size that its last look would have found significant nine
//! times out of ten, at the rounds' noise.
//!
//! Instruction counts are judged apart ([`judge_work_rounds`]): counts of the same code repeat
//! (exactly, or within a few instructions of threads), so two rounds show their spread, and a
//! change of counts beyond it is a finding at once.

use crate::model::Direction;

use super::confirmation::{INSTRUCTIONS_FLOOR_PCT, INSTRUCTIONS_SPREAD_MULTIPLIER};
use super::distribution::{students_t_quantile, students_t_sf};
use super::location::run_location;
use super::robust::{PercentBase, median, sample_sd};
use super::verdict::{Verdict, VerdictKind};

/// Rounds after which an adaptive comparison looks at its verdicts (and after its last).
/// Looks are spread out because each one costs a share of α; the early ones stop large
/// changes, the late ones have the degrees of freedom to see small ones.
pub const LOOKS: [usize; 9] = [3, 4, 6, 8, 11, 15, 20, 27, 35];

/// Half-width of the band in which a change counts as none, in percent.
pub const EQUIVALENCE_MARGIN_PCT: f64 = 2.0;

/// Smallest change of wall time a comparison calls a finding, in percent: more than two builds
/// of identical code were seen to differ by, however certain. On this machine such builds
/// measured −1.7 % (8 rounds, 0.3 % apart), +2.7 % (3 rounds) and −2.2 % (15 rounds, 1.3 %
/// apart, with each side's programs read afresh every round): in about one comparison of ten
/// something about one side (not its code, its instructions counted alike) held for the whole
/// comparison. Between the margin and this, a change is neither unchanged nor a finding:
/// `inconclusive`, with its size.
pub const MIN_TIME_CHANGE_PCT: f64 = 3.0;

/// The share of a claimed change that rounds must rule out to refute it (see
/// [`SequentialPlan::refuting`]).
pub const REFUTED_SHARE: f64 = 0.5;

/// The widest band a claim gives: beyond ±50 % a ratio's band is no longer symmetric
/// (−100 % is the floor) and a claim that large is ruled out by anything near zero.
pub const MAX_REFUTING_MARGIN_PCT: f64 = 50.0;

/// Chance of calling a benchmark unchanged while it changed by more than the margin.
pub const EQUIVALENCE_ALPHA: f64 = 0.05;

/// How often a change of the stated detectable size would be found.
pub const POWER: f64 = 0.9;

/// How a comparison's rounds are judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SequentialPlan {
    /// Most rounds the comparison may run: the horizon α is spent over.
    pub max_rounds: usize,
    /// Whether it looks before its last round (and may stop there).
    pub adaptive: bool,
    /// Chance of any false alarm per benchmark × metric, over all looks.
    pub alpha: f64,
    /// Chance of calling unchanged a change larger than the margin, over all looks.
    pub equivalence_alpha: f64,
    /// The equivalence band, ± this many percent.
    pub margin_pct: f64,
    /// Smallest change called a regression or an improvement, in percent.
    pub min_effect_pct: f64,
}

impl SequentialPlan {
    /// A plan that looks after each of [`LOOKS`] up to `max_rounds` and stops when decided.
    pub fn adaptive(max_rounds: usize) -> Self {
        Self {
            max_rounds: max_rounds.max(1),
            adaptive: true,
            alpha: 0.01,
            equivalence_alpha: EQUIVALENCE_ALPHA,
            margin_pct: EQUIVALENCE_MARGIN_PCT,
            min_effect_pct: MIN_TIME_CHANGE_PCT,
        }
    }

    /// The plan for measuring again a change claimed to be `claimed_pct` (a confirmation): a
    /// change less than half of it, either way, counts as none, so its rounds stop as soon as
    /// they rule the claim out, not only once they rule out ±2 %. A noisy benchmark flagged
    /// +80 % is refuted by rounds that place it within ±40 %; a real change still has to be
    /// significant to confirm, which is looked at first. The band is at most ±50 %.
    ///
    /// A claim rests on history: its new level held over the commits after it, each built
    /// apart, so no one pair of builds made it, and rounds that see it again need not clear
    /// [`MIN_TIME_CHANGE_PCT`] as well (a branch's one pair of builds must): the margin is
    /// enough.
    pub fn refuting(&self, claimed_pct: f64) -> Self {
        if claimed_pct.is_nan() {
            return *self;
        }
        let half = (claimed_pct.abs() * REFUTED_SHARE).min(MAX_REFUTING_MARGIN_PCT);
        Self {
            margin_pct: self.margin_pct.max(half),
            min_effect_pct: self.min_effect_pct.min(EQUIVALENCE_MARGIN_PCT),
            ..*self
        }
    }

    /// A plan of exactly `rounds` rounds, judged once at the end with all of α.
    pub fn fixed(rounds: usize) -> Self {
        Self {
            adaptive: false,
            ..Self::adaptive(rounds)
        }
    }

    /// Whether the verdict is looked at after `rounds` rounds (before the last).
    pub fn looks_after(&self, rounds: usize) -> bool {
        self.adaptive && rounds < self.max_rounds && LOOKS.contains(&rounds)
    }

    /// The share of `total` error spent by the time `rounds` rounds ran: Pocock-type.
    fn spent(&self, total: f64, rounds: usize) -> f64 {
        if !self.adaptive {
            return if rounds >= self.max_rounds {
                total
            } else {
                0.0
            };
        }
        let t = (rounds as f64 / self.max_rounds as f64).min(1.0);
        total * (1.0 + (std::f64::consts::E - 1.0) * t).ln()
    }
}

/// A verdict of rounds, and whether it is decided (a look found a change or equivalence).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundsVerdict {
    pub verdict: Verdict,
    pub decided: bool,
    /// The rounds the verdict rests on (those up to its deciding look).
    pub rounds: usize,
}

/// Sizes of paired differences: logarithms of ratios between positive values, otherwise the
/// metric's unit against the baseline's magnitude.
#[derive(Debug, Clone, Copy)]
enum DifferenceScale {
    Ratio,
    Linear(PercentBase),
}

impl DifferenceScale {
    fn pct(self, d: f64) -> f64 {
        let pct = match self {
            DifferenceScale::Ratio => 100.0 * d.exp_m1(),
            DifferenceScale::Linear(base) => base.percent(d),
        };
        pct.clamp(-f64::MAX, f64::MAX)
    }

    fn difference_of_pct(self, pct: f64) -> f64 {
        match self {
            DifferenceScale::Ratio => (pct / 100.0).ln_1p(),
            DifferenceScale::Linear(base) => pct / base.percent(1.0),
        }
    }
}

/// The per-round differences of two sides' locations and the scale they are measured on.
fn paired_differences(
    rounds: &[(Vec<f64>, Vec<f64>)],
    direction: Direction,
) -> (Vec<f64>, DifferenceScale, f64) {
    let locations: Vec<(f64, f64)> = (rounds.iter())
        .map(|(b, h)| (run_location(b, direction), run_location(h, direction)))
        .collect();
    let baseline = median(&locations.iter().map(|l| l.0).collect::<Vec<_>>());
    let positive = locations.iter().all(|&(b, h)| b > 0.0 && h > 0.0);
    if positive {
        let d = locations.iter().map(|&(b, h)| (h / b).ln()).collect();
        return (d, DifferenceScale::Ratio, baseline);
    }
    let head = median(&locations.iter().map(|l| l.1).collect::<Vec<_>>());
    let scale = DifferenceScale::Linear(PercentBase::new(baseline, head));
    let d = (locations.iter())
        .map(|&(b, h)| (h - b).clamp(-f64::MAX, f64::MAX))
        .collect();
    (d, scale, baseline)
}

/// Share of rounds trimmed from each end of the differences before they are judged.
pub const TRIM: f64 = 0.2;

/// One look at the first `n` differences: their 20 % trimmed mean and its standard error from
/// the winsorized spread (Tukey and McLaughlin; Yuen's test of one sample), with `h − 1`
/// degrees of freedom, `h` the rounds kept.
///
/// A round's runs are sometimes slowed as a whole (a process that lands beside other work, a
/// layout that misses the cache): on this machine, beside nothing, 1 or 2 rounds in 10 of an
/// unchanged branch differed by 10–50 % while the others differed by 0.1 %. One such round
/// widens a plain t statistic's spread a hundredfold and leaves the verdict undecided for the
/// rest of the budget; trimmed, it is one of the rounds left out. Under no change a disturbance
/// is as likely to slow the base's run as the head's: the differences are symmetric and the
/// trimmed mean estimates the change without bias. Fewer than five rounds trim none (a plain
/// paired t).
struct Look {
    n: usize,
    mean: f64,
    se: f64,
    /// The two-sided test's critical t and its p-value.
    critical: f64,
    p_value: f64,
    /// The one-sided critical t of each equivalence test.
    equivalence_critical: f64,
    /// t quantile of the power asked for.
    power_quantile: f64,
    /// The winsorized standard deviation of the differences.
    sd: f64,
}

impl Look {
    fn new(d: &[f64], alpha: f64, gamma: f64) -> Self {
        let n = d.len();
        let mut sorted = d.to_vec();
        sorted.sort_unstable_by(f64::total_cmp);
        let g = (TRIM * n as f64).floor() as usize;
        let kept = n - 2 * g;
        let mean = sorted[g..n - g]
            .iter()
            .map(|v| v / kept as f64)
            .sum::<f64>();
        let (low, high) = (sorted[g], sorted[n - 1 - g]);
        let winsorized: Vec<f64> = sorted.iter().map(|v| v.clamp(low, high)).collect();
        let sd = sample_sd(&winsorized);
        let se = (sd * (n as f64).sqrt() / kept as f64).min(f64::MAX);
        let df = (kept - 1) as f64;
        let t = if se > 0.0 {
            mean / se
        } else if mean == 0.0 {
            0.0
        } else {
            mean.signum() * f64::INFINITY
        };
        Look {
            n,
            mean,
            se,
            critical: students_t_quantile(1.0 - alpha / 2.0, df),
            p_value: (2.0 * students_t_sf(t.abs(), df)).min(1.0),
            equivalence_critical: students_t_quantile(1.0 - gamma, df),
            power_quantile: students_t_quantile(POWER, df),
            sd,
        }
    }
}

/// Judges a benchmark × metric from its rounds (each: the base's samples, the head's), in the
/// order they ran. `finished`: the comparison measures no more rounds, so its last round is a
/// look too (the worker asks mid-way with `false`; the verdict shown is judged with `true`).
pub fn judge_rounds(
    rounds: &[(Vec<f64>, Vec<f64>)],
    direction: Direction,
    plan: &SequentialPlan,
    finished: bool,
) -> RoundsVerdict {
    let (d, scale, baseline) = paired_differences(rounds, direction);
    let samples = |side: fn(&(Vec<f64>, Vec<f64>)) -> usize| rounds.iter().map(side).sum();
    let mut verdict = Verdict {
        kind: VerdictKind::Inconclusive,
        baseline,
        value: baseline,
        change_pct: 0.0,
        ci_low_pct: 0.0,
        ci_high_pct: 0.0,
        p_value: None,
        noise_pct: 0.0,
        threshold_pct: plan.min_effect_pct,
        detectable_pct: None,
        base_samples: samples(|r| r.0.len()),
        head_samples: samples(|r| r.1.len()),
        method: "sequential-rounds",
        note: String::new(),
    };
    let mut spent = (0.0, 0.0);
    let mut last = None;
    for n in 2..=d.len() {
        if !(plan.looks_after(n) || (finished && n == d.len())) {
            continue;
        }
        let (alpha, gamma) = (
            plan.spent(plan.alpha, n) - spent.0,
            plan.spent(plan.equivalence_alpha, n) - spent.1,
        );
        spent = (spent.0 + alpha, spent.1 + gamma);
        let look = Look::new(&d[..n], alpha, gamma);
        let decision = decide(&look, scale, plan, direction);
        last = Some((look, decision));
        if decision.is_some() {
            break;
        }
    }
    let Some((look, decision)) = last else {
        verdict.note = format!(
            "{} round{} measured: at least two are needed to see how much runs differ",
            d.len(),
            if d.len() == 1 { "" } else { "s" }
        );
        return RoundsVerdict {
            verdict,
            decided: false,
            rounds: d.len(),
        };
    };
    describe(&mut verdict, &look, scale, plan, decision, d.len());
    RoundsVerdict {
        decided: decision.is_some(),
        rounds: look.n,
        verdict,
    }
}

/// What a look decides, if anything.
fn decide(
    look: &Look,
    scale: DifferenceScale,
    plan: &SequentialPlan,
    direction: Direction,
) -> Option<VerdictKind> {
    let reach = look.critical * look.se;
    let significant = look.mean.abs() > reach || (look.se == 0.0 && look.mean != 0.0);
    let large = scale.pct(look.mean).abs() >= plan.min_effect_pct;
    if significant && large {
        return Some(VerdictKind::of_change(look.mean, direction));
    }
    let band = look.equivalence_critical * look.se;
    let (upper, lower) = (
        scale.difference_of_pct(plan.margin_pct),
        scale.difference_of_pct(-plan.margin_pct),
    );
    (look.mean + band < upper && look.mean - band > lower).then_some(VerdictKind::NoChange)
}

/// Fills a verdict's evidence from its deciding (or last) look.
fn describe(
    verdict: &mut Verdict,
    look: &Look,
    scale: DifferenceScale,
    plan: &SequentialPlan,
    decision: Option<VerdictKind>,
    measured: usize,
) {
    let reach = (look.critical * look.se).min(f64::MAX);
    verdict.change_pct = scale.pct(look.mean);
    verdict.value = match scale {
        DifferenceScale::Ratio => verdict.baseline * look.mean.exp(),
        DifferenceScale::Linear(_) => verdict.baseline + look.mean,
    };
    verdict.ci_low_pct = scale.pct(look.mean - reach);
    verdict.ci_high_pct = scale.pct(look.mean + reach);
    verdict.p_value = Some(look.p_value);
    verdict.noise_pct = scale.pct(look.sd).abs();
    verdict.threshold_pct = scale.pct(reach).abs().max(plan.min_effect_pct);
    let detectable = scale
        .pct(((look.critical + look.power_quantile) * look.se).min(f64::MAX))
        .abs()
        .max(plan.min_effect_pct);
    verdict.detectable_pct = Some(detectable);
    verdict.kind = decision.unwrap_or(VerdictKind::Inconclusive);
    let rounds = format!(
        "{} of at most {} round{}",
        look.n,
        plan.max_rounds,
        if plan.max_rounds == 1 { "" } else { "s" }
    );
    verdict.note = match decision {
        Some(VerdictKind::NoChange) => format!(
            "unchanged after {rounds}: the change lies within ±{:.1} %, and a change above \
             {detectable:.1} % would have been seen",
            plan.margin_pct
        ),
        Some(_) => {
            format!("decided after {rounds}; a change above {detectable:.1} % would have been seen")
        }
        None if look.mean.abs() > reach => format!(
            "undecided after {measured} round{} (of at most {}): a change of {:+.1} %, \
             certain but smaller than the {:.1} % that two builds of the same code can differ \
             by, and not within ±{:.1} %",
            if measured == 1 { "" } else { "s" },
            plan.max_rounds,
            verdict.change_pct,
            plan.min_effect_pct,
            plan.margin_pct
        ),
        None => format!(
            "undecided after {measured} round{} (of at most {}): neither significant nor \
             within ±{:.1} %; only a change above {detectable:.1} % would have been seen at \
             this noise",
            if measured == 1 { "" } else { "s" },
            plan.max_rounds,
            plan.margin_pct
        ),
    };
}

/// Judges instruction counts (or another measure of work that repeats) from their rounds:
/// identical counts on both sides are exactly no change in work; a difference beyond
/// [`INSTRUCTIONS_SPREAD_MULTIPLIER`] × the rounds' own spread (at least
/// [`INSTRUCTIONS_FLOOR_PCT`]) is a change, decided at once; a difference within it is none.
/// Two rounds are needed to see the spread.
pub fn judge_work_rounds(rounds: &[(Vec<f64>, Vec<f64>)]) -> RoundsVerdict {
    let base: Vec<f64> = rounds.iter().map(|(b, _)| median(b)).collect();
    let head: Vec<f64> = rounds.iter().map(|(_, h)| median(h)).collect();
    let (b, h) = (median(&base), median(&head));
    let reference = PercentBase::new(b, h);
    let spread = (base.iter().map(|v| (v - b).abs()))
        .chain(head.iter().map(|v| (v - h).abs()))
        .fold(0.0, f64::max);
    let spread_pct = reference.percent(spread).abs();
    let tolerance = (INSTRUCTIONS_SPREAD_MULTIPLIER * spread_pct).max(INSTRUCTIONS_FLOOR_PCT);
    let change_pct = reference.percent(h - b);
    let decided = rounds.len() >= 2;
    let kind = if !decided {
        VerdictKind::Inconclusive
    } else if change_pct.abs() > tolerance {
        VerdictKind::of_change(h - b, Direction::Lower)
    } else {
        VerdictKind::NoChange
    };
    let note = match kind {
        _ if !decided => "one round: two are needed to see whether counts repeat".to_owned(),
        VerdictKind::NoChange if h == b && spread == 0.0 => {
            "identical counts in every round: exactly no change in work".to_owned()
        }
        VerdictKind::NoChange => format!(
            "the counts differ by less than their own spread allows (±{tolerance:.3} %): no \
             change in work"
        ),
        _ => format!(
            "the work changed by {change_pct:+.3} %, beyond the ±{tolerance:.3} % that these \
             rounds' counts move by themselves"
        ),
    };
    RoundsVerdict {
        verdict: Verdict {
            kind,
            baseline: b,
            value: h,
            change_pct,
            ci_low_pct: change_pct,
            ci_high_pct: change_pct,
            p_value: None,
            noise_pct: spread_pct,
            threshold_pct: tolerance,
            detectable_pct: decided.then_some(tolerance),
            base_samples: base.len(),
            head_samples: head.len(),
            method: "instruction-counts",
            note,
        },
        decided,
        rounds: rounds.len(),
    }
}

#[cfg(test)]
#[path = "sequential_tests.rs"]
mod tests;
