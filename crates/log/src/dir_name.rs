//! Partition directory names: `<topic>-<partition>`, and the `-delete` / `-stray` / `-future`
//! forms.
//! Topic names may contain `-` and `.`, so the partition is what follows the LAST `-`.

/// Parses `<topic>-<partition>`; `None` for anything else (including `-delete`/`-future` dirs).
pub fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    if topic.is_empty() || partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let partition: i32 = partition.parse().ok()?;
    Some((topic.to_string(), partition))
}

/// `<topic>-<partition>`.
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// `<topic>-<partition>.<uuid-simple>-delete`: the name a deleted partition is renamed to.
pub fn delete_dir_name(topic: &str, partition: i32, uuid: uuid::Uuid) -> String {
    format!("{topic}-{partition}.{}-delete", uuid.simple())
}

/// `<topic>-<partition>.<uuid-simple>-stray`: Kafka's name for a partition directory the
/// metadata does not know (kept, never deleted automatically).
pub fn stray_dir_name(topic: &str, partition: i32, uuid: uuid::Uuid) -> String {
    format!("{topic}-{partition}.{}-stray", uuid.simple())
}

/// True for stray partition directories (see [`stray_dir_name`]).
pub fn is_stray_dir(name: &str) -> bool {
    name.ends_with("-stray")
}

/// True for directories of deleted partitions awaiting removal.
pub fn is_delete_dir(name: &str) -> bool {
    name.ends_with("-delete")
}

/// `<topic>-<partition>.<uuid-simple>-future`: Kafka's name for the copy a replica move
/// (AlterReplicaLogDirs) builds in the target log dir.
pub fn future_dir_name(topic: &str, partition: i32, uuid: uuid::Uuid) -> String {
    format!("{topic}-{partition}.{}-future", uuid.simple())
}

/// `<topic>-<partition>.<uuid-simple>-moved`: Runnel's name for the source copy of a replica
/// move between the two renames of its swap (the future copy is complete when it exists).
pub fn moved_dir_name(topic: &str, partition: i32, uuid: uuid::Uuid) -> String {
    format!("{topic}-{partition}.{}-moved", uuid.simple())
}

/// The partition of a `<topic>-<partition>.<id>-<suffix>` directory whose suffix is `suffix`.
/// The id holds no `.`, so the partition part is what precedes the last `.`.
pub fn parse_suffixed_dir(name: &str, suffix: &str) -> Option<(String, i32)> {
    let rest = name.strip_suffix(suffix)?.strip_suffix('-')?;
    let (partition_dir, id) = rest.rsplit_once('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    parse_partition_dir(partition_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_dashes_and_dots() {
        assert_eq!(parse_partition_dir("orders-0"), Some(("orders".into(), 0)));
        assert_eq!(
            parse_partition_dir("my-topic.v2-17"),
            Some(("my-topic.v2".into(), 17))
        );
        assert_eq!(parse_partition_dir("a--3"), Some(("a-".into(), 3)));
        assert_eq!(parse_partition_dir("orders"), None);
        assert_eq!(parse_partition_dir("-3"), None);
        assert_eq!(parse_partition_dir("t-"), None);
        assert_eq!(parse_partition_dir("t--1"), Some(("t-".into(), 1)));
        assert_eq!(parse_partition_dir("t-99999999999"), None);
        let d = delete_dir_name("my-topic", 2, uuid::Uuid::nil());
        assert_eq!(d, "my-topic-2.00000000000000000000000000000000-delete");
        assert!(is_delete_dir(&d));
        assert_eq!(parse_partition_dir(&d), None);
        assert_eq!(parse_partition_dir("t-0.abc-future"), None);
        let s = stray_dir_name("my-topic", 2, uuid::Uuid::nil());
        assert_eq!(s, "my-topic-2.00000000000000000000000000000000-stray");
        assert!(is_stray_dir(&s) && !is_delete_dir(&s));
        assert_eq!(parse_partition_dir(&s), None);
        assert_eq!(partition_dir_name("my-topic.v2", 17), "my-topic.v2-17");
        let f = future_dir_name("my.t-x", 3, uuid::Uuid::nil());
        assert_eq!(parse_partition_dir(&f), None);
        assert_eq!(parse_suffixed_dir(&f, "future"), Some(("my.t-x".into(), 3)));
        assert_eq!(parse_suffixed_dir(&f, "moved"), None);
        let m = moved_dir_name("t", 0, uuid::Uuid::nil());
        assert_eq!(parse_suffixed_dir(&m, "moved"), Some(("t".into(), 0)));
        assert_eq!(parse_suffixed_dir("t-0-future", "future"), None);
        assert_eq!(parse_suffixed_dir("t-0.-future", "future"), None);
    }
}
