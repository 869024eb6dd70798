//! Where a new replica goes (Kafka's `LogManager.nextLogDirs`): the online log dir holding the
//! fewest partitions, current and future copies both counted; ties go to the dir listed first
//! in `log.dirs` (Kafka's order among equal counts is a hash map's, so any is faithful).

/// The online dirs in the order a new replica tries them. `counts[i]` is how many partition
/// copies dir `i` holds, `online[i]` whether it may take a new one.
pub fn placement_order(counts: &[usize], online: &[bool]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..counts.len())
        .filter(|&i| online.get(i).copied().unwrap_or(false))
        .collect();
    // A stable sort keeps `log.dirs` order among equal counts.
    order.sort_by_key(|&i| counts[i]);
    order
}

/// The dir a new replica is created in: the preferred one (AlterReplicaLogDirs named it before
/// the replica existed) when it is online, else the first of [`placement_order`].
pub fn choose_dir(counts: &[usize], online: &[bool], preferred: Option<usize>) -> Option<usize> {
    if let Some(p) = preferred.filter(|&p| online.get(p).copied().unwrap_or(false)) {
        return Some(p);
    }
    placement_order(counts, online).first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewest_partitions_first_ties_in_config_order() {
        assert_eq!(placement_order(&[3, 1, 1], &[true; 3]), vec![1, 2, 0]);
        assert_eq!(placement_order(&[0, 0], &[true; 2]), vec![0, 1]);
        assert_eq!(placement_order(&[5], &[true]), vec![0]);
    }

    #[test]
    fn offline_dirs_take_nothing() {
        assert_eq!(
            placement_order(&[3, 0, 1], &[true, false, true]),
            vec![2, 0]
        );
        assert_eq!(choose_dir(&[0], &[false], None), None);
    }

    #[test]
    fn a_preferred_dir_wins_while_online() {
        assert_eq!(choose_dir(&[0, 9], &[true, true], Some(1)), Some(1));
        assert_eq!(choose_dir(&[0, 9], &[true, false], Some(1)), Some(0));
        assert_eq!(choose_dir(&[0, 9], &[true, true], Some(7)), Some(0));
    }

    /// Placing one replica after another spreads them evenly (the real-process test checks
    /// the same on disk).
    #[test]
    fn repeated_placement_spreads_evenly() {
        let mut counts = vec![0usize; 3];
        for _ in 0..10 {
            let d = choose_dir(&counts, &[true; 3], None).unwrap();
            counts[d] += 1;
        }
        assert_eq!(counts, vec![4, 3, 3]);
    }
}
