//! Which public keys may speak for which host id.

use std::collections::BTreeMap;

use ringstore_placement::HostId;

use crate::keys::{PublicKeys, is_derived};

/// The keys each host id is bound to. A derived host id (see
/// [`PublicKeys::host_id`]) is bound to the keys it was made from, by
/// construction; a host id from before identities (a random UUID) is bound
/// to the first keys seen with it, and from then on only those may speak
/// for it (trust on first use, as SSH's known hosts).
#[derive(Clone, Debug, Default)]
pub struct Binding {
    legacy: BTreeMap<HostId, PublicKeys>,
}

impl Binding {
    /// Whether `keys` may speak for `host`, binding a legacy host id seen
    /// for the first time to them.
    pub fn admit(&mut self, host: HostId, keys: &PublicKeys) -> bool {
        if is_derived(host) {
            return keys.made(host);
        }
        *self.legacy.entry(host).or_insert(*keys) == *keys
    }

    /// Whether `keys` may speak for `host`, without binding anything.
    pub fn admits(&self, host: HostId, keys: &PublicKeys) -> bool {
        if is_derived(host) {
            return keys.made(host);
        }
        self.legacy.get(&host).is_none_or(|bound| bound == keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeKeys;

    #[test]
    fn a_derived_host_id_admits_only_its_own_keys() {
        let mut binding = Binding::default();
        let (a, b) = (NodeKeys::for_test(1), NodeKeys::for_test(2));
        assert!(!binding.admit(a.host_id(), &b.public()));
        assert!(binding.admit(a.host_id(), &a.public()));
    }

    #[test]
    fn a_legacy_host_id_is_bound_to_the_first_keys_seen() {
        let mut binding = Binding::default();
        let host = HostId::random();
        let (a, b) = (NodeKeys::for_test(1), NodeKeys::for_test(2));
        assert!(binding.admits(host, &b.public()), "nothing bound yet");
        assert!(binding.admit(host, &a.public()));
        assert!(binding.admit(host, &a.public()));
        assert!(!binding.admit(host, &b.public()));
        assert!(!binding.admits(host, &b.public()));
    }
}
