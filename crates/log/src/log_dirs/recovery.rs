//! Start-up after an interrupted replica move: the pure rule for the partition directories of
//! every log dir, before any log is opened.
//!
//! A move (see `moves`) builds `<t>-<p>.<id>-future` in the target dir; its swap, once that
//! copy is complete and fsynced, renames the source `<t>-<p>` to `<t>-<p>.<id>-moved`, then the
//! future to `<t>-<p>`, then removes the moved one. So whatever instant a kill hits:
//! * current + future (no moved): the copy was not finished; the current copy is whole and
//!   stays. The move restarts (as Kafka's future replica resumes after a restart): its
//!   future copy is removed and the broker starts the move again once the partition is
//!   hosted (`LogDirs::take_resumable`).
//! * moved + future, no current: killed between the two renames; the future is complete, so
//!   it becomes the current copy and the moved one is removed.
//! * current + moved: killed after both renames; the moved copy is removed.
//! * moved alone: the current copy went missing (by hand?): the moved copy becomes current
//!   again rather than lose it.
//! * future alone: no copy to trust as complete; kept aside as `-stray` for an operator.
//! * two current copies: refused, with Kafka's `LogManager.loadLog` advice.

use std::collections::BTreeMap;

/// What a partition directory found on disk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Current,
    Future,
    Moved,
}

/// One partition directory: in log dir `dir`, named `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub dir: usize,
    pub name: String,
    pub topic: String,
    pub partition: i32,
    pub kind: Kind,
}

/// A step of the start-up plan, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Remove the directory `name` of log dir `dir`.
    Remove { dir: usize, name: String },
    /// Rename `from` to the partition's current name (`<t>-<p>`), within log dir `dir`.
    MakeCurrent { dir: usize, from: String },
    /// Rename `from` to a fresh `-stray` name, within log dir `dir`.
    SetAside { dir: usize, from: String },
    /// Remove the unfinished future copy `name` of log dir `dir` and move the partition there
    /// again (from scratch) once it is hosted.
    Resume { dir: usize, name: String },
}

/// The steps that leave at most one current copy of every partition, or why start-up refuses.
pub fn plan(found: &[Found], dir_paths: &[String]) -> Result<Vec<Step>, String> {
    let mut by_key: BTreeMap<(&str, i32), Vec<&Found>> = BTreeMap::new();
    for f in found {
        by_key.entry((&f.topic, f.partition)).or_default().push(f);
    }
    let mut steps = Vec::new();
    for ((topic, partition), copies) in by_key {
        let of = |k: Kind| copies.iter().filter(move |f| f.kind == k).copied();
        let currents: Vec<&Found> = of(Kind::Current).collect();
        let futures: Vec<&Found> = of(Kind::Future).collect();
        let moved: Vec<&Found> = of(Kind::Moved).collect();
        let remove = |f: &Found| Step::Remove {
            dir: f.dir,
            name: f.name.clone(),
        };
        let path = |f: &Found| dir_paths.get(f.dir).cloned().unwrap_or_default();
        match (currents.as_slice(), futures.as_slice(), moved.as_slice()) {
            ([a, b, ..], _, _) => {
                return Err(format!(
                    "Duplicate log directories for {topic}-{partition} are found in both {} and {}. \
                     It is likely because log directory failure happened while broker was replacing \
                     current replica with future replica. Recover broker from this failure by \
                     manually deleting one of the two directories for this partition. It is \
                     recommended to delete the partition in the log directory that is known to \
                     have failed recently.",
                    path(a),
                    path(b)
                ))
            }
            ([_], _, _) => {
                steps.extend(moved.iter().map(|f| remove(f)));
                match futures.as_slice() {
                    [one] => steps.push(Step::Resume {
                        dir: one.dir,
                        name: one.name.clone(),
                    }),
                    several => steps.extend(several.iter().map(|f| remove(f))),
                }
            }
            ([], [future], [_, ..]) => {
                steps.push(Step::MakeCurrent {
                    dir: future.dir,
                    from: future.name.clone(),
                });
                steps.extend(moved.iter().map(|f| remove(f)));
            }
            ([], [], [only]) => steps.push(Step::MakeCurrent {
                dir: only.dir,
                from: only.name.clone(),
            }),
            ([], futures, []) => steps.extend(futures.iter().map(|f| Step::SetAside {
                dir: f.dir,
                from: f.name.clone(),
            })),
            ([], _, _) => {
                return Err(format!(
                    "{topic}-{partition} has {} future and {} moved copies and no current one; \
                     keep the complete copy as {topic}-{partition} by hand",
                    futures.len(),
                    moved.len()
                ))
            }
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(dir: usize, kind: Kind) -> Found {
        let name = match kind {
            Kind::Current => "t-0".to_string(),
            Kind::Future => format!("t-0.f{dir}-future"),
            Kind::Moved => format!("t-0.m{dir}-moved"),
        };
        Found {
            dir,
            name,
            topic: "t".into(),
            partition: 0,
            kind,
        }
    }

    fn paths() -> Vec<String> {
        vec!["/a".into(), "/b".into()]
    }

    #[test]
    fn a_lone_current_copy_is_left_alone() {
        assert_eq!(plan(&[f(0, Kind::Current)], &paths()), Ok(vec![]));
    }

    #[test]
    fn an_unfinished_move_restarts_and_the_current_copy_stays() {
        let steps = plan(&[f(0, Kind::Current), f(1, Kind::Future)], &paths()).unwrap();
        assert_eq!(
            steps,
            vec![Step::Resume {
                dir: 1,
                name: "t-0.f1-future".into()
            }]
        );
    }

    #[test]
    fn a_swap_killed_between_its_renames_promotes_the_complete_future() {
        let steps = plan(&[f(0, Kind::Moved), f(1, Kind::Future)], &paths()).unwrap();
        assert_eq!(
            steps,
            vec![
                Step::MakeCurrent {
                    dir: 1,
                    from: "t-0.f1-future".into()
                },
                Step::Remove {
                    dir: 0,
                    name: "t-0.m0-moved".into()
                }
            ]
        );
    }

    #[test]
    fn a_swap_killed_after_its_renames_removes_the_moved_copy() {
        let steps = plan(&[f(0, Kind::Moved), f(1, Kind::Current)], &paths()).unwrap();
        assert_eq!(
            steps,
            vec![Step::Remove {
                dir: 0,
                name: "t-0.m0-moved".into()
            }]
        );
    }

    #[test]
    fn the_last_copy_is_never_removed() {
        assert_eq!(
            plan(&[f(0, Kind::Moved)], &paths()).unwrap(),
            vec![Step::MakeCurrent {
                dir: 0,
                from: "t-0.m0-moved".into()
            }]
        );
        assert_eq!(
            plan(&[f(1, Kind::Future)], &paths()).unwrap(),
            vec![Step::SetAside {
                dir: 1,
                from: "t-0.f1-future".into()
            }]
        );
    }

    #[test]
    fn two_current_copies_refuse_to_start() {
        let mut b = f(1, Kind::Current);
        b.dir = 1;
        let e = plan(&[f(0, Kind::Current), b], &paths()).unwrap_err();
        assert!(e.contains("Duplicate log directories for t-0"), "{e}");
        assert!(e.contains("/a") && e.contains("/b"), "{e}");
    }

    /// Every combination of at most one copy of each kind per dir keeps a current copy when
    /// any copy that could be complete (current or moved) existed.
    #[test]
    fn no_combination_loses_the_partition() {
        let kinds = [Kind::Current, Kind::Future, Kind::Moved];
        for mask in 1u32..(1 << 6) {
            let found: Vec<Found> = (0..6)
                .filter(|b| mask & (1 << b) != 0)
                .map(|b| f(b / 3, kinds[b % 3]))
                .collect();
            let trusted = found.iter().any(|c| c.kind != Kind::Future);
            match plan(&found, &paths()) {
                Err(_) => {}
                Ok(steps) => {
                    let removed = |c: &Found| {
                        steps.iter().any(|s| {
                            matches!(s, Step::Remove { dir, name } if *dir == c.dir && *name == c.name)
                        })
                    };
                    let promoted = steps.iter().any(|s| matches!(s, Step::MakeCurrent { .. }));
                    let kept_current = found.iter().any(|c| c.kind == Kind::Current && !removed(c));
                    if trusted {
                        assert!(kept_current || promoted, "{found:?} -> {steps:?}");
                    }
                }
            }
        }
    }
}
