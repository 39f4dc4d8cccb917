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
        let dp = best_order(&costs, &preds, &joint, 1 << 20).unwrap();
        assert!(respects(&dp.order, &preds));
        let bf = brute_force(&costs, &preds, &joint);
        assert!((dp.cost - bf).abs() < 1e-9 * bf.max(1.0), "{dp:?} vs {bf}");
        let recomputed = expected_cost_order(&costs, &dp.order, &joint);
        assert!((recomputed - dp.cost).abs() < 1e-9 * bf.max(1.0));
        let g = greedy_order(&costs, &preds, &joint);
        assert!(respects(&g, &preds));
        assert!(expected_cost_order(&costs, &g, &joint) >= bf - 1e-9);
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
    let dp = ideals.best_order(&costs, &table);
    assert!(respects(&dp.order, &preds));
    let recomputed = expected_cost_order(&costs, &dp.order, &joint);
    assert!((recomputed - dp.cost).abs() < 1e-9 * dp.cost);
    assert!((ideals.order_cost(&costs, &table, &dp.order) - dp.cost).abs() < 1e-9 * dp.cost);
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
    let got = expected_cost_order(&costs, &order, &joint);
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
