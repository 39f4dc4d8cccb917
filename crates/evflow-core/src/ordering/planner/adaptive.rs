//! The checkpoint of a dynamic path and the decision algorithms of the
//! `adaptive` policy: cost updates, the post-stratified estimate of the
//! joint pass distribution, the choice of order (exact DP over feasible
//! prefix sets, rank rule or A-Greedy, in `model`), the sampling rates and
//! installing an order.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::OrderingPlanner;
use super::estimate::estimate;
use super::measure::measurement_costs;
use super::robust::*;
use super::state::*;
use super::stats::*;
use crate::ordering::model;
use crate::ordering::policy::Policy;
use crate::schedule::OrderChange;

/// A possible gain is measured (`set_rates`) only when it exceeds this
/// many sampling budgets (the most the extra samples can cost).
const CONTEST_BUDGETS: f64 = 0.5;

/// The longest interval between decisions while a question is open.
const CONTEST_INTERVAL: u64 = 1024;

impl OrderingPlanner {
    pub(super) fn checkpoint(&self, d: &Dyn, n_obs: u64) {
        let Ok(mut st) = d.state.try_lock() else {
            return;
        };
        if n_obs < d.next_check.load(Relaxed) {
            return;
        }
        let t0 = Instant::now();
        if d.policy == Policy::Adaptive && !st.learning {
            self.verify_change(d, &mut st, n_obs);
            self.drift_check(d, &mut st, n_obs);
        }
        // Events one at a time: during the warm-up, while a step was never
        // timed, every event comes here, so that a step timed for the first
        // time is measured from the next.
        let refresh_rates = st.learning
            && d.policy == Policy::Adaptive
            && d.per_obs().is_none()
            && st.cost_known.contains(&false);
        if refresh_rates && n_obs < st.next_decision {
            self.rate_newly_timed(d, &mut st);
        }
        // A drift check takes a few µs: longer, it was descheduled.
        let check = (t0.elapsed().as_nanos() as i64).min(CHECK_CAP_NS);
        let mut spent = check;
        if n_obs >= st.next_decision {
            // A decision takes long enough (0.1 ms) to be descheduled by
            // other processes: it counts the thread's CPU time when the
            // system tells it.
            let cpu0 = thread_cpu_ns();
            let t1 = Instant::now();
            match d.policy {
                Policy::HepFrame => self.decide_hepframe(d, &mut st, n_obs),
                _ => self.decide_adaptive(d, &mut st, n_obs),
            }
            let wall = t1.elapsed().as_nanos() as i64;
            spent += match (cpu0, thread_cpu_ns()) {
                (Some(a), Some(b)) if b >= a => ((b - a) as i64).min(wall),
                _ => wall,
            };
        }
        let next = if st.learning {
            if refresh_rates {
                n_obs + 1
            } else {
                st.next_decision
            }
        } else {
            let block = obs_for(self.tuning.drift_block.max(1), d.per_obs());
            st.next_decision.min(n_obs + block)
        };
        d.next_check.store(next.max(n_obs + 1), Relaxed);
        self.decide_ns.fetch_add(spent, Relaxed);
    }

    /// During the warm-up: a step timed for the first time since the last
    /// decision is measured after rejections at the cheap steps' rate if
    /// measuring it costs no more than measuring them all, instead of the
    /// rate of a step never timed until the next decision.
    fn rate_newly_timed(&self, d: &Dyn, st: &mut State) {
        // The costs are estimated again only once a step's own ring holds a
        // timing it had not at the last estimate (a few loads per step).
        let timed = |j: usize| {
            self.rings[d.steps[j]]
                .as_ref()
                .is_some_and(|r| r.pushed() > 0)
        };
        if !(0..d.steps.len()).any(|j| !st.cost_known[j] && timed(j)) {
            return;
        }
        let before = st.cost_known.clone();
        self.update_costs(d, st);
        let cheap_total: f64 = (0..d.steps.len())
            .filter(|&j| before[j] && !st.heavy[j])
            .map(|j| st.probe[j])
            .sum();
        let mut changed = false;
        for (j, &known) in before.iter().enumerate() {
            if known || !st.cost_known[j] {
                continue;
            }
            let probe = st.costs[j].max(st.decided_costs[j]);
            if probe <= cheap_total {
                st.heavy[j] = false;
                st.probe[j] = probe;
                st.rates[j] = 1.0;
                changed = true;
            }
        }
        if changed {
            settle_constraints(&mut st.rates, &d.preds(), &st.heavy);
            let groups = read(&d.current).groups.clone();
            d.put_current(groups, st);
        }
    }

    /// A decision at the next observed event (the first per-event samples
    /// of batches came in; the batch that measured them is observed next,
    /// once the running times of its steps are recorded): the batches in
    /// flight whose path has not started take its order, rather than the
    /// written one.
    pub(super) fn decide_soon(&self, d: &Dyn) {
        lock(&d.state).next_decision = 0;
        d.next_check.store(0, Relaxed);
    }

    /// The first batch observed on the path (`n_obs`): its observations
    /// are batches, so the warm-up and the decision intervals, counts of
    /// events, become batches sized by their events (`warmup_obs`,
    /// `obs_for`); a decision scheduled for an observation count meant for
    /// single events comes forward. (A `hepframe` path waited for 64 batches
    /// before its first decision.)
    pub(super) fn batches_began(&self, d: &Dyn, n_obs: u64) {
        let per_obs = d.per_obs();
        let mut st = lock(&d.state);
        let due = if st.learning {
            st.phase_start + first_decision(d.policy, &self.tuning, per_obs)
        } else {
            n_obs + obs_for(st.interval, per_obs)
        };
        if due < st.next_decision {
            st.next_decision = due;
            d.next_check.fetch_min(due, Relaxed);
        }
    }

    pub(super) fn decide_adaptive(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let t = &self.tuning;
        self.update_costs(d, st);
        st.decisions += 1;
        let cur = read(&d.current).clone();
        let stops = d.stops.snapshot(d.steps.len() + 1);
        let own_samples: Vec<Sample> = lock(&d.samples).ring.clone();
        let mut own_epochs = st.archive.clone();
        own_epochs.push(Epoch {
            order: cur.order.clone(),
            stops: stops.clone(),
        });
        let (samples, mut epochs) = self.with_imported(st, own_samples, own_epochs);
        let (joint, q) = estimate(d.steps.len(), &epochs, &samples);
        let per_obs = d.per_obs();
        let learning_done = n_obs.saturating_sub(st.phase_start) >= warmup_obs(t, per_obs);
        let was_learning = st.learning;
        if joint.is_empty() {
            st.learning = was_learning && !learning_done;
            self.set_rates(d, st, &cur, None);
            self.schedule(st, n_obs, per_obs, was_learning, learning_done, false);
            return;
        }
        let prior = PRIOR_SAMPLES / (PRIOR_SAMPLES + samples.len() as f64);
        let ideals = d.ideals();
        let pm = PassModel::new(joint, ideals.as_deref(), q, prior);
        let cur_cost = pm.cost(&st.costs, &st.shared, &cur.groups);
        let mut changed = false;
        let mut in_force = cur.clone();
        let mut cost = cur_cost;
        st.contender.clear();
        if samples.len() >= MIN_SAMPLES_TO_REORDER {
            let (order, method) = match &ideals {
                Some(ideals) => {
                    let dp = ideals.best_order(&st.costs, &st.shared, &pm.table);
                    (
                        dp.order,
                        format!("exact DP over {} feasible prefix sets", dp.states),
                    )
                }
                None => (
                    model::greedy_order(&st.costs, &st.shared, &d.preds(), &pm.joint),
                    "A-Greedy (too many prefix sets for the exact search)".to_string(),
                ),
            };
            let groups = group_expensive(&order, &st.costs, &d.preds(), t.concurrent_above_s);
            let new_cost = pm.cost(&st.costs, &st.shared, &groups);
            // Orders compete on their sequential cost; the grouping (a latency
            // option that costs work) is applied to the winner.
            let cur_order: Vec<usize> = cur.order.iter().map(|&i| i as usize).collect();
            let seq = |o: &[usize]| {
                let groups: Vec<Vec<usize>> = o.iter().map(|&j| vec![j]).collect();
                pm.cost(&st.costs, &st.shared, &groups)
            };
            let (cur_seq, new_seq) = (seq(&cur_order), seq(&order));
            // Switch only when the expected gain exceeds the switching cost
            // (`min_gain`) plus its uncertainty: that of the step costs
            // (`SWITCH_Z` standard errors of the difference of the two
            // orders' costs) combined with that of the pass table (about
            // 1/√samples relative).
            let gain = cur_seq - new_seq;
            let sigma_costs = gap_sigma(
                &pm,
                &st.cost_se,
                &st.shared,
                &st.shared_se,
                &cur_order,
                &order,
            );
            let sigma_pass = NOISE_GAIN / (samples.len() as f64).sqrt() * cur_seq;
            let needed = t.min_gain * cur_seq + (SWITCH_Z * sigma_costs).hypot(sigma_pass);
            // An order its own stop counts refuted is not taken again
            // before the samples have doubled.
            let seen = lock(&d.samples).total;
            st.refuted.retain(|r| r.until_samples > seen);
            let refuted = st.refuted.iter().any(|r| r.order == order);
            if groups != cur.groups && !refuted && (gain > needed || order == cur_order) {
                let note = [st.drift_note.take(), st.cost_note.take()]
                    .into_iter()
                    .flatten()
                    .map(|n| format!("{n}; "))
                    .collect::<String>();
                let counted: u64 = epochs.iter().map(|e| e.stops.iter().sum::<u64>()).sum();
                let reason = format!(
                    "{note}{method}, {}: expected {} per event (previous order {}; gain {} against {} needed: switching cost {}, uncertainty {} of the costs, {} of the pass rates)",
                    sample_basis(samples.len(), counted),
                    micros(new_cost),
                    micros(cur_cost),
                    micros(gain),
                    micros(needed),
                    micros(t.min_gain * cur_seq),
                    micros(SWITCH_Z * sigma_costs),
                    micros(sigma_pass)
                );
                // What the new order's stop counts should show, to verify
                // the change (`verify`): the pass rate of each step on the
                // events reaching it there.
                let mut prefix = 0u64;
                let predicted = groups
                    .iter()
                    .flatten()
                    .map(|&j| {
                        let (before, after) = (pm.pass(prefix), pm.pass(prefix | 1 << j));
                        prefix |= 1 << j;
                        if before > 0.0 {
                            (after / before).clamp(0.0, 1.0)
                        } else {
                            1.0
                        }
                    })
                    .collect();
                st.trial = Some(Trial {
                    previous: cur.groups.clone(),
                    previous_stops: stops.clone(),
                    order: groups.iter().flatten().copied().collect(),
                    predicted,
                    moved: prefix_differs(&cur_order, &order),
                    refuted: None,
                });
                let current = make_current(&d.steps, groups, &st.rates, st.targets(&d.preds()));
                in_force = self.install(d, current, n_obs, reason);
                st.drift = DriftState::default();
                // Keep the counts of the order left.
                let left = epochs.pop().expect("the current epoch");
                st.archive_epoch(left);
                cost = new_cost;
                changed = true;
            } else if gain > (t.min_gain + CONTEST_BUDGETS * t.sample_budget) * cur_seq
                && sigma_pass > SWITCH_Z * sigma_costs
                && !refuted
            {
                // Worth switching to if the pass table is right (by more than
                // the extra sampling costs), and it is the pass table, not
                // the timings, that leaves it unproven: measure what answers
                // it (`set_rates`) rather than settle on a guess.
                st.contender = order.clone();
            }
        }
        st.cost_note = None;
        st.expected_s = cost;
        st.learning = was_learning && !learning_done;
        self.set_rates(d, st, &in_force, Some(&pm));
        self.schedule(st, n_obs, per_obs, was_learning, learning_done, changed);
    }

    /// The next decision: during learning at 1/32, 1/16, …, 1/2 and all of
    /// the warm-up; afterwards at an interval that doubles while the order
    /// stays, and returns to its minimum after a change. Both are counted
    /// in events: in batches of `per_obs` events, the batches that hold
    /// them (`warmup_obs`, `obs_for`).
    pub(super) fn schedule(
        &self,
        st: &mut State,
        n_obs: u64,
        per_obs: Option<f64>,
        was_learning: bool,
        done: bool,
        changed: bool,
    ) {
        let t = &self.tuning;
        let warmup = warmup_obs(t, per_obs);
        if was_learning && !done {
            let since = n_obs.saturating_sub(st.phase_start);
            let mut step = first_step(t, per_obs);
            while step <= since {
                step *= 2;
            }
            st.next_decision = st.phase_start + step.min(warmup);
            return;
        }
        st.learning = false;
        if changed || was_learning {
            st.stable = 0;
            st.interval = t.min_interval.max(1);
        } else {
            // An open question between two orders is looked at again at
            // least every `CONTEST_INTERVAL` events, as its measurements come
            // in (`set_rates`).
            st.stable += 1;
            let longest = if !st.contender.is_empty() {
                CONTEST_INTERVAL.min(t.max_interval)
            } else {
                t.max_interval
            };
            st.interval = (st.interval * 2).min(longest.max(1));
        }
        st.next_decision = n_obs + obs_for(st.interval, per_obs);
    }

    /// Sets the sampling rates and installs them with the plans in force.
    ///
    /// A step is *expensive* when measuring it after a rejection costs more
    /// than measuring all cheaper steps together (or when it was never
    /// measured). Sampled events measure every cheap step after a rejection:
    /// their rate spends the budget (`sample_budget`, less once the order is
    /// stable; half of it when there are expensive steps) of the expected
    /// cost, within `[min_sample_rate, max_sample_rate]`, and every event
    /// while learning. Each expensive step is measured after a rejection at
    /// its own rate, an equal share of the other half of the budget, at most
    /// the cheap steps' rate (nested: an event that measures an expensive
    /// step measures every cheaper one).
    pub(super) fn set_rates(&self, d: &Dyn, st: &mut State, cur: &Current, pm: Option<&PassModel>) {
        let t = &self.tuning;
        let n = d.steps.len();
        let (lo, hi) = (t.min_sample_rate, t.max_sample_rate.max(t.min_sample_rate));
        // Probability that the event was rejected before each step, and
        // by each group.
        let mut after_reject = vec![0.5f64; n];
        let mut reject = Vec::with_capacity(cur.groups.len());
        let mut expected = st.expected_s;
        if let Some(pm) = pm {
            let mut passed = 0u64;
            for g in &cur.groups {
                let reach = pm.pass(passed).clamp(0.0, 1.0);
                for &j in g {
                    after_reject[j] = 1.0 - reach;
                }
                for &j in g {
                    passed |= 1 << j;
                }
                reject.push((reach - pm.pass(passed).clamp(0.0, 1.0)).max(0.0));
            }
            expected = pm.cost(&st.costs, &st.shared, &cur.groups);
        }
        // What measuring each step after a rejection costs per sampled
        // event (`measure`): its running time and the producers it needs
        // that the event may not have run.
        let in_force: Vec<usize> = cur.groups.iter().flatten().copied().collect();
        let (measured, probe) = measurement_costs(st, &in_force, &after_reject);
        // From the costliest down, a step is expensive while that exceeds
        // the total of all the steps that cost less (measuring it with them
        // would at least halve their rate); a step never measured is
        // expensive too.
        let mut by_cost: Vec<usize> = (0..n).filter(|&j| st.cost_known[j]).collect();
        by_cost.sort_by(|&a, &b| probe[b].total_cmp(&probe[a]));
        let mut heavy: Vec<bool> = (0..n).map(|j| !st.cost_known[j]).collect();
        let mut cheaper: f64 = by_cost.iter().map(|&j| probe[j]).sum();
        for &j in &by_cost {
            cheaper -= probe[j];
            if probe[j] <= cheaper || cheaper <= 0.0 {
                cheaper += probe[j];
                break;
            }
            heavy[j] = true;
        }
        let n_heavy = heavy.iter().filter(|&&h| h).count();
        let budget = t.sample_budget * stable_factor(st.stable);
        let cheap_budget = if n_heavy > 0 { budget / 2.0 } else { budget };
        let cheap_rate = if st.learning {
            1.0
        } else if cheaper > 0.0 {
            (cheap_budget * expected / cheaper).clamp(lo, hi)
        } else {
            hi
        };
        for j in 0..n {
            st.rates[j] = if !heavy[j] {
                cheap_rate
            } else if !st.cost_known[j] {
                hi
            } else {
                heavy_rate(t, st.learning, budget, expected, probe[j], n_heavy).min(cheap_rate)
            };
        }
        settle_constraints(&mut st.rates, &d.preds(), &heavy);
        // An open question between the order in force and a better looking
        // one (`contender`): it is answered by the pass rates
        // of the cheap steps that the contender runs earlier, on the events
        // stopped by the steps they would jump. They are measured after
        // those rejections only, at a rate of their own from half the full
        // budget (whatever the stability of the order).
        st.targeted.clear();
        if !st.learning && !st.contender.is_empty() {
            let mut jumped = jumped(&in_force, &st.contender);
            let mut probe_targeted = 0.0;
            for (j, by) in jumped.iter_mut().enumerate() {
                if heavy[j] {
                    *by = 0;
                }
                let stopped: f64 = cur
                    .groups
                    .iter()
                    .zip(&reject)
                    .filter(|(g, _)| g.iter().any(|&i| *by >> i & 1 == 1))
                    .map(|(_, &p)| p)
                    .sum();
                probe_targeted += measured[j] * stopped;
            }
            if probe_targeted > 0.0 {
                let rate = (t.sample_budget / 2.0 * expected / probe_targeted).clamp(lo, 1.0);
                st.targeted = jumped
                    .iter()
                    .enumerate()
                    .map(|(j, &by)| (by, if by != 0 { rate.max(st.rates[j]) } else { 0.0 }))
                    .collect();
            }
        }
        st.heavy = heavy;
        st.probe = probe;
        d.put_current(cur.groups.clone(), st);
    }

    /// Puts a new order in force: the plans, the lock-free copy of the
    /// order, fresh stop counts, and the history entry.
    pub(super) fn install(
        &self,
        d: &Dyn,
        current: Current,
        n_obs: u64,
        reason: String,
    ) -> Arc<Current> {
        let order = current
            .plan
            .order()
            .map(|m| self.labels[m].clone())
            .collect();
        let current = Arc::new(current);
        d.set_current(current.clone());
        for (slot, &i) in d.order_now.iter().zip(&current.order) {
            slot.store(i, Relaxed);
        }
        d.stops.reset();
        lock(&self.history).push(OrderChange {
            path: d.name.clone(),
            at_event: n_obs,
            order,
            reason,
        });
        current
    }
}

/// What a decision's pass model rests on: its samples, post-stratified on
/// the events counted on the path. With none counted yet, the samples are
/// the probe of the first batch (the Python face decides on it before any
/// batch enters the path), and nothing was post-stratified.
fn sample_basis(samples: usize, counted: u64) -> String {
    if counted == 0 {
        format!(
            "{samples} samples from a probe of events run through every step before any event was counted on the path (no stop counts yet to post-stratify on)"
        )
    } else {
        format!("{samples} samples post-stratified on {counted} events")
    }
}
