//! Checks of the solvers against brute force on small paths.

use super::*;

fn brute_force(costs: &[f64], preds: &[u64], joint: &Joint) -> f64 {
    fn rec(costs: &[f64], preds: &[u64], joint: &Joint, done: u64, acc: f64, best: &mut f64) {
        let n = costs.len();
        if done.count_ones() as usize == n {
            *best = best.min(acc);
            return;
        }
        for j in 0..n {
            if done & 1 << j == 0 && preds[j] & !done == 0 {
                let c = acc + costs[j] * joint.pass_all(done);
                rec(costs, preds, joint, done | 1 << j, c, best);
            }
        }
    }
    let mut best = f64::INFINITY;
    rec(costs, preds, joint, 0, 0.0, &mut best);
    best
}

fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 11
}

#[test]
#[allow(clippy::needless_range_loop)]
fn dp_matches_brute_force_on_random_problems() {
    let mut s = 7u64;
    for case in 0..60 {
        let n = 1 + case % 7;
        let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 100) as f64).collect();
        let mut preds = vec![0u64; n];
        for j in 0..n {
            for i in 0..j {
                if lcg(&mut s).is_multiple_of(5) {
                    preds[j] |= 1 << i;
                }
            }
        }
        let masks: Vec<u64> = (0..50).map(|_| lcg(&mut s) & ((1 << n) - 1)).collect();
        let joint = Joint::from_masks(masks);
        let dp = best_order(&costs, &[], &preds, &joint, 1 << 20).unwrap();
        assert!(respects(&dp.order, &preds));
        let bf = brute_force(&costs, &preds, &joint);
        assert!((dp.cost - bf).abs() < 1e-9 * bf.max(1.0), "{dp:?} vs {bf}");
        let recomputed = expected_cost_order(&costs, &[], &dp.order, &joint);
        assert!((recomputed - dp.cost).abs() < 1e-9 * bf.max(1.0));
        let g = greedy_order(&costs, &[], &preds, &joint);
        assert!(respects(&g, &preds));
        assert!(expected_cost_order(&costs, &[], &g, &joint) >= bf - 1e-9);
    }
}

#[test]
fn incremental_pass_table_matches_a_scan() {
    // 30 steps in three chains of ten: 11^3 ideals, too many steps for
    // the dense table, so the incremental one runs.
    let n = 30;
    let preds: Vec<u64> = (0..n)
        .map(|j| if j % 10 == 0 { 0 } else { 1u64 << (j - 1) })
        .collect();
    let ideals = Ideals::new(&preds, 1 << 20).unwrap();
    assert_eq!(ideals.len(), 11 * 11 * 11);
    let mut s = 3u64;
    let masks: Vec<(u64, f64)> = (0..300)
        .map(|_| {
            // Mostly passing decisions, as in practice.
            let fail = lcg(&mut s) & lcg(&mut s) & lcg(&mut s) & ((1 << n) - 1);
            (!fail & ((1 << n) - 1), 1.0 + (lcg(&mut s) % 3) as f64)
        })
        .collect();
    let joint = Joint::from_weighted(masks);
    let table = ideals.pass_table(&joint);
    for (i, &a) in ideals.sets().iter().enumerate() {
        assert!((table[i] - joint.pass_all(a)).abs() < 1e-12, "ideal {a:b}");
        assert_eq!(ideals.index_of(a), Some(i));
    }
    // The optimum from the table is the brute-force optimum's cost.
    let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 50) as f64).collect();
    let dp = ideals.best_order(&costs, &[], &table);
    assert!(respects(&dp.order, &preds));
    let recomputed = expected_cost_order(&costs, &[], &dp.order, &joint);
    assert!((recomputed - dp.cost).abs() < 1e-9 * dp.cost);
    assert!((ideals.order_cost(&costs, &[], &table, &dp.order) - dp.cost).abs() < 1e-9 * dp.cost);
}

#[test]
fn dense_and_sparse_pass_tables_agree() {
    let joint = Joint::from_masks([0b101, 0b111, 0b001, 0b110, 0b111]);
    let t = joint.superset_table(3);
    for a in 0..8u64 {
        assert!((t[a as usize] - joint.pass_all(a)).abs() < 1e-12);
    }
}

#[test]
fn rank_order_is_optimal_under_independence_for_out_forests() {
    // Independent decisions: build the exact product distribution.
    let pass = [0.9, 0.3, 0.6, 0.95, 0.5];
    let costs = [1.0, 4.0, 2.0, 0.5, 3.0];
    let preds = [0, 1 << 0, 1 << 0, 1 << 2, 0];
    let n = pass.len();
    let joint = Joint::from_weighted((0..1u64 << n).map(|m| {
        let w: f64 = (0..n)
            .map(|j| {
                if m & 1 << j != 0 {
                    pass[j]
                } else {
                    1.0 - pass[j]
                }
            })
            .product();
        (m, w)
    }));
    let order = rank_order(&costs, &pass, &preds).unwrap();
    assert!(respects(&order, &preds));
    let best = brute_force(&costs, &preds, &joint);
    let got = expected_cost_order(&costs, &[], &order, &joint);
    assert!((got - best).abs() < 1e-9, "{order:?}: {got} vs {best}");
    // Not a forest: a step with two unrelated predecessors.
    assert!(rank_order(&costs, &pass, &[0, 0, 0b11, 0, 0]).is_none());
}

#[test]
fn levels_and_reduction() {
    let preds = [0, 0b1, 0b11, 0];
    assert_eq!(levels(&preds), vec![vec![0, 3], vec![1], vec![2]]);
    assert_eq!(transitive_reduction(&preds), vec![0, 0b1, 0b10, 0]);
}

/// The work per event of `order` on `events` (decision vectors), run as the
/// engine runs it: each step until the first rejection, a shared producer
/// once per event, with the first step that needs it.
fn simulated_cost(costs: &[f64], shared: &[SharedCost], order: &[usize], events: &[u64]) -> f64 {
    let mut total = 0.0;
    for &m in events {
        let mut ran = vec![false; shared.len()];
        for &j in order {
            total += costs[j];
            for (k, s) in shared.iter().enumerate() {
                if s.needed_by >> j & 1 == 1 && !std::mem::replace(&mut ran[k], true) {
                    total += s.cost;
                }
            }
            if m >> j & 1 == 0 {
                break;
            }
        }
    }
    total / events.len() as f64
}

/// The least [`simulated_cost`] over every order respecting `preds`.
fn brute_force_shared(
    costs: &[f64],
    shared: &[SharedCost],
    preds: &[u64],
    events: &[u64],
) -> (f64, Vec<usize>) {
    fn rec(
        ctx: (&[f64], &[SharedCost], &[u64], &[u64]),
        order: &mut Vec<usize>,
        best: &mut (f64, Vec<usize>),
    ) {
        let (costs, shared, preds, events) = ctx;
        let n = costs.len();
        if order.len() == n {
            let c = simulated_cost(costs, shared, order, events);
            if c < best.0 {
                *best = (c, order.clone());
            }
            return;
        }
        let done = order.iter().fold(0u64, |d, &j| d | 1 << j);
        for (j, &p) in preds.iter().enumerate() {
            if done & 1 << j == 0 && p & !done == 0 {
                order.push(j);
                rec(ctx, order, best);
                order.pop();
            }
        }
    }
    let mut best = (f64::INFINITY, Vec::new());
    rec((costs, shared, preds, events), &mut Vec::new(), &mut best);
    best
}

/// A 100 µs producer feeds two cheap, loose jet cuts; two selective cuts
/// need nothing. Charged to no step, the producer looks free and the jet
/// cuts go first, paying it on every event; charged to the first cut that
/// needs it, the search runs the selective cuts first, as the brute force
/// over all orders (the producer run once per event, at first need) does.
#[test]
fn dp_charges_a_shared_producer_to_the_first_step_that_needs_it() {
    // Steps: j1, j2 (1 µs, pass 80%, need jets), a, b (5 µs, pass 50%).
    let costs = [1.0, 1.0, 5.0, 5.0];
    let shared = [SharedCost {
        needed_by: 0b0011,
        cost: 100.0,
    }];
    let pass = [0.8, 0.8, 0.5, 0.5];
    // Every decision vector, in proportion to its probability (independent
    // decisions, out of 100 events per step).
    let events = independent_events(&pass, 10_000.0);
    let joint = Joint::from_masks(events.iter().copied());
    let preds = [0u64; 4];
    let (bf, bf_order) = brute_force_shared(&costs, &shared, &preds, &events);
    let dp = best_order(&costs, &shared, &preds, &joint, 1 << 20).unwrap();
    assert!(
        (dp.cost - bf).abs() < 1e-9 * bf,
        "{dp:?} vs {bf} {bf_order:?}"
    );
    // The selective cuts (alike: either one first) before the jet cuts.
    assert!(dp.order[..2].iter().all(|&j| j >= 2), "{dp:?}");
    // Blind to the producer, the search puts a jet cut first, and that
    // order costs about four times as much once the producer is paid.
    let blind = best_order(&costs, &[], &preds, &joint, 1 << 20).unwrap();
    assert!(blind.order[0] < 2, "{blind:?}");
    let blind_cost = expected_cost_order(&costs, &shared, &blind.order, &joint);
    assert!(blind_cost > 3.0 * dp.cost, "{blind_cost} vs {}", dp.cost);
    // The model's expected cost is the simulated work.
    let sim = simulated_cost(&costs, &shared, &blind.order, &events);
    assert!((blind_cost - sim).abs() < 1e-9 * sim);
    let g = greedy_order(&costs, &shared, &preds, &joint);
    assert!(g[..2].iter().all(|&j| j >= 2), "{g:?}");
}

#[test]
#[allow(clippy::needless_range_loop)]
fn dp_with_shared_producers_matches_brute_force_on_random_problems() {
    let mut s = 11u64;
    for case in 0..80 {
        let n = 2 + case % 6;
        let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 20) as f64).collect();
        let mut preds = vec![0u64; n];
        for j in 0..n {
            for i in 0..j {
                if lcg(&mut s).is_multiple_of(6) {
                    preds[j] |= 1 << i;
                }
            }
        }
        // One to three producers, each needed by two or more steps.
        let shared: Vec<SharedCost> = (0..1 + case % 3)
            .map(|_| {
                let a = lcg(&mut s) as usize % n;
                let b = (a + 1 + lcg(&mut s) as usize % (n - 1)) % n;
                let more = lcg(&mut s) & ((1 << n) - 1) & lcg(&mut s);
                SharedCost {
                    needed_by: 1 << a | 1 << b | more,
                    cost: (lcg(&mut s) % 200) as f64,
                }
            })
            .collect();
        let events: Vec<u64> = (0..60)
            .map(|_| (lcg(&mut s) | lcg(&mut s)) & ((1 << n) - 1))
            .collect();
        let joint = Joint::from_masks(events.iter().copied());
        let (bf, _) = brute_force_shared(&costs, &shared, &preds, &events);
        let dp = best_order(&costs, &shared, &preds, &joint, 1 << 20).unwrap();
        assert!(respects(&dp.order, &preds));
        assert!((dp.cost - bf).abs() < 1e-9 * bf.max(1.0), "{dp:?} vs {bf}");
        let sim = simulated_cost(&costs, &shared, &dp.order, &events);
        assert!((sim - dp.cost).abs() < 1e-9 * bf.max(1.0));
        let ideals = Ideals::new(&preds, 1 << 20).unwrap();
        let table = ideals.pass_table(&joint);
        let again = ideals.order_cost(&costs, &shared, &table, &dp.order);
        assert!((again - dp.cost).abs() < 1e-9 * bf.max(1.0));
        let g = greedy_order(&costs, &shared, &preds, &joint);
        assert!(respects(&g, &preds));
        assert!(simulated_cost(&costs, &shared, &g, &events) >= bf - 1e-9);
        // Groups of one step: the same cost as the order.
        let groups: Vec<Vec<usize>> = dp.order.iter().map(|&j| vec![j]).collect();
        let grouped = expected_cost(&costs, &shared, &groups, &joint);
        assert!((grouped - dp.cost).abs() < 1e-9 * bf.max(1.0));
    }
}

/// The rank rule with the first-need charge of shared producers is
/// optimal under independence (against the brute force over every order,
/// each producer run once per event with the first step needing it) on
/// random paths without constraints whose producers feed disjoint sets
/// of steps; the rule on the steps' own costs is not (a 100 µs producer
/// of two cheap, loose cuts: they went first).
#[test]
fn rank_rule_with_shared_producers_matches_brute_force_under_independence() {
    let mut s = 11u64;
    let mut worse_without = 0;
    for case in 0..40 {
        let n = 3 + case % 4;
        let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 50) as f64).collect();
        let pass: Vec<f64> = (0..n)
            .map(|_| 0.1 + (lcg(&mut s) % 85) as f64 / 100.0)
            .collect();
        // Disjoint sets of steps, one producer each (some of one step).
        let mut shared = Vec::new();
        let mut taken = 0u64;
        for _ in 0..2 {
            let set = lcg(&mut s) & ((1 << n) - 1) & !taken;
            if set != 0 {
                taken |= set;
                let cost = (lcg(&mut s) % 200) as f64;
                shared.push(SharedCost {
                    needed_by: set,
                    cost,
                });
            }
        }
        let events = independent_events(&pass, 20_000.0);
        let preds = vec![0u64; n];
        let (best, _) = brute_force_shared(&costs, &shared, &preds, &events);
        let order = rank_order_shared(&costs, &shared, &pass, &preds).unwrap();
        let got = simulated_cost(&costs, &shared, &order, &events);
        // The events are the independent distribution rounded to 1/20 000.
        assert!(
            got <= best * (1.0 + 1e-3),
            "{case}: {order:?} {got} vs {best}"
        );
        let plain = rank_order(&costs, &pass, &preds).unwrap();
        if simulated_cost(&costs, &shared, &plain, &events) > best * 1.01 {
            worse_without += 1;
        }
    }
    assert!(worse_without > 0, "the charge never mattered");
    // A producer feeding a step whose constraining step does not need it:
    // two parents, not an out-forest.
    let shared = [SharedCost {
        needed_by: 0b10,
        cost: 5.0,
    }];
    assert!(rank_order_shared(&[1.0, 1.0], &shared, &[0.5, 0.5], &[0, 0b01]).is_none());
}

/// Every decision vector of steps passing independently with rates `pass`,
/// each repeated in proportion to its probability (`scale` events in all).
fn independent_events(pass: &[f64], scale: f64) -> Vec<u64> {
    let n = pass.len();
    let mut events = Vec::new();
    for m in 0..1u64 << n {
        let w: f64 = (0..n)
            .map(|j| {
                if m >> j & 1 == 1 {
                    pass[j]
                } else {
                    1.0 - pass[j]
                }
            })
            .product();
        events.extend(std::iter::repeat_n(m, (w * scale).round() as usize));
    }
    events
}
