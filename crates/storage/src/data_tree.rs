//! Where a keyspace's cells live in the engine: the tree `data/<uuid>`.
//!
//! The tree is named by the keyspace's id, not its name, so dropping a
//! keyspace and creating one with the same name (which gets a new id)
//! starts from an empty tree: a replica that missed the drop can never
//! resurrect the old data into the new keyspace. The prefix also versions
//! the layout of the keys inside (`key_encoding`): a new layout would live
//! in new trees.

use ringstore_cell::KeyspaceId;

/// The prefix of the trees that hold keyspace data.
const DATA_TREE_PREFIX: &str = "data/";

/// The engine tree of a keyspace's data, and back.
pub trait DataTree: Sized {
    /// The name of the engine tree that holds this keyspace's cells: `data/<uuid>`.
    fn data_tree_name(&self) -> String;

    /// The keyspace whose data tree is called `name`, if `name` is one.
    fn from_data_tree_name(name: &str) -> Option<Self>;
}

impl DataTree for KeyspaceId {
    fn data_tree_name(&self) -> String {
        format!("{DATA_TREE_PREFIX}{}", self.0.hyphenated())
    }

    fn from_data_tree_name(name: &str) -> Option<KeyspaceId> {
        name.strip_prefix(DATA_TREE_PREFIX)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyspace_lives_in_a_data_tree_named_by_its_id() {
        let id: KeyspaceId = "67e55044-10b1-426f-9247-bb680e5fe0c8".parse().unwrap();
        assert_eq!(
            id.data_tree_name(),
            "data/67e55044-10b1-426f-9247-bb680e5fe0c8"
        );
        assert_eq!(
            KeyspaceId::from_data_tree_name(&id.data_tree_name()),
            Some(id)
        );
        assert_eq!(KeyspaceId::from_data_tree_name("system"), None);
    }

    #[test]
    fn a_recreated_keyspace_gets_a_different_tree() {
        assert_ne!(
            KeyspaceId::random().data_tree_name(),
            KeyspaceId::random().data_tree_name()
        );
    }
}
