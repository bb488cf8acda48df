//! Who may connect, by client address: the server's allow and deny lists
//! (checked at accept) and each export's allow list (an export a client may
//! not use is invisible to it: not listed, and unknown to GO and INFO).
//!
//! Entries are CIDR blocks (`10.0.0.0/8`, `fd00::/8`) or single addresses.
//! IPv4 clients reaching an IPv6 listener are matched as IPv4. Unix-socket
//! clients have no address: the socket file's permissions govern them.
//!
//! An export may also name the TLS client identities that may use it: the
//! subject distinguished names of verified client certificates, as qemu-nbd's
//! `--tls-authz` lists them. A name is written as RFC 4514 has it
//! (`CN=alice,O=Example,C=GB`, what `openssl x509 -noout -subject -nameopt
//! RFC2253` prints); the reverse order openssl prints by default matches
//! too, and spaces around `,` and `=` and the case of attribute types do not
//! matter. With pre-shared keys instead of certificates, the names are the
//! users of the key file. A client that proved nothing has no identity.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::{AccessError, EntryProblem};
use crate::tls::Identity;

/// An allow list and a deny list; an empty allow list allows everyone.
/// Exports may add the TLS identities they admit (empty: any client).
#[derive(Clone, Debug, Default)]
pub struct Access {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    identities: Vec<Allowed>,
}

/// One identity an export admits.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Allowed {
    /// A certificate subject, as its attributes in RFC 4514 order.
    Subject(Vec<String>),
    /// A user of the pre-shared key file.
    PskUser(String),
}

impl Access {
    /// Parses both lists; an error names the bad entry's list and index.
    pub fn parse(allow: &[String], deny: &[String], key: &str) -> Result<Access, AccessError> {
        let nets = |list: &[String], name: &str| {
            list.iter()
                .enumerate()
                .map(|(i, s)| {
                    parse_net(s).map_err(|problem| AccessError { entry: format!("{key}{name}[{i}]"), problem })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Access { allow: nets(allow, "allow")?, deny: nets(deny, "deny")?, identities: Vec::new() })
    }

    /// Admits only clients whose TLS identity is one of `names`: PSK users
    /// with `psk_users`, else certificate subjects; an error names the bad
    /// entry (`{key}[i]`).
    pub fn with_identities(mut self, names: &[String], key: &str, psk_users: bool) -> Result<Access, AccessError> {
        self.identities = names
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let allowed = match psk_users {
                    true if s.is_empty() => Err(EntryProblem::EmptyName),
                    true => Ok(Allowed::PskUser(s.clone())),
                    false => parse_name(s).map(Allowed::Subject),
                };
                allowed.map_err(|problem| AccessError { entry: format!("{key}[{i}]"), problem })
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether only certain TLS identities are admitted.
    pub fn wants_identity(&self) -> bool {
        !self.identities.is_empty()
    }

    /// Whether a client at `ip` with the TLS `identity` (`None`: it proved
    /// none) may use what this guards.
    pub fn admits(&self, ip: Option<IpAddr>, identity: Option<&Identity>) -> bool {
        self.permits(ip) && (self.identities.is_empty() || identity.is_some_and(|id| self.lists(id)))
    }

    fn lists(&self, identity: &Identity) -> bool {
        match identity {
            Identity::Subject(subject) => parse_name(subject).is_ok_and(|name| {
                self.identities.iter().any(|allowed| match allowed {
                    Allowed::Subject(a) => *a == name || (a.len() == name.len() && a.iter().eq(name.iter().rev())),
                    Allowed::PskUser(_) => false,
                })
            }),
            Identity::PskUser(user) => self.identities.iter().any(|a| matches!(a, Allowed::PskUser(u) if u == user)),
        }
    }

    /// Whether a client at `ip` (`None`: a Unix socket) may connect.
    pub fn permits(&self, ip: Option<IpAddr>) -> bool {
        let Some(ip) = ip.map(|ip| ip.to_canonical()) else { return true };
        (self.allow.is_empty() || self.allow.iter().any(|n| n.contains(&ip)))
            && !self.deny.iter().any(|n| n.contains(&ip))
    }
}

/// A distinguished name as its attributes (`TYPE=value`, type in capitals,
/// no spaces around the separators), in the order written.
fn parse_name(s: &str) -> Result<Vec<String>, EntryProblem> {
    let mut attributes = Vec::new();
    let mut rest = s;
    while !rest.trim().is_empty() {
        // A comma after an odd number of backslashes is escaped: it belongs
        // to the value (`\\,` is an escaped backslash, then a separator).
        let escaped = |i: usize| rest[..i].bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1;
        let end = rest.char_indices().find(|&(i, c)| c == ',' && !escaped(i)).map_or(rest.len(), |(i, _)| i);
        let (attribute, tail) = rest.split_at(end);
        rest = tail.strip_prefix(',').unwrap_or(tail);
        let Some((kind, value)) = attribute.split_once('=') else {
            return Err(EntryProblem::NotAName(s.to_string()));
        };
        let (kind, value) = (kind.trim(), value.trim());
        if kind.is_empty() || value.is_empty() {
            return Err(EntryProblem::EmptyAttribute(s.to_string()));
        }
        attributes.push(format!("{}={value}", kind.to_ascii_uppercase()));
    }
    if attributes.is_empty() {
        return Err(EntryProblem::EmptyName);
    }
    Ok(attributes)
}

fn parse_net(s: &str) -> Result<IpNet, EntryProblem> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| EntryProblem::NotANetwork(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn allow_then_deny_with_blocks_addresses_and_mapped_ipv4() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = Access::parse(&strings(&["10.0.0.0/8", "::1"]), &strings(&["10.9.0.0/16"]), "server.").unwrap();
        assert!(a.permits(ip("10.1.2.3")));
        assert!(!a.permits(ip("10.9.1.1")), "deny wins over allow");
        assert!(!a.permits(ip("192.168.1.1")), "not on the allow list");
        assert!(a.permits(ip("::1")));
        assert!(a.permits(ip("::ffff:10.1.2.3")), "IPv4 through an IPv6 socket");
        assert!(a.permits(None), "Unix sockets are governed by file permissions");
        assert!(Access::default().permits(ip("192.168.1.1")));
        let err = Access::parse(&strings(&["10.0.0.0/8", "ten"]), &[], "server.").unwrap_err();
        assert!(err.to_string().starts_with("server.allow[1]: \"ten\" is not an address"), "{err}");
    }

    #[test]
    fn identities_match_in_either_order_whatever_the_spacing() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let subject = |s: &str| Some(Identity::Subject(s.to_string()));
        let a = Access::default().with_identities(&strings(&["CN=alice,O=Example Org,C=GB"]), "x", false).unwrap();
        assert!(a.wants_identity());
        assert!(a.admits(None, subject("CN=alice,O=Example Org,C=GB").as_ref()));
        assert!(a.admits(None, subject("c = GB, o = Example Org, cn = alice").as_ref()), "openssl's default order");
        assert!(!a.admits(None, subject("CN=alice,O=Example Org").as_ref()), "a different name");
        assert!(!a.admits(None, subject("CN=bob,O=Example Org,C=GB").as_ref()));
        assert!(!a.admits(None, None), "no certificate, no identity");
        assert!(!a.admits(None, subject("O=Example Org,CN=alice,C=GB").as_ref()), "order is more than a set");
        let escaped = Access::default().with_identities(&strings(&["CN=Smith\\, J,O=Example"]), "x", false).unwrap();
        assert!(escaped.admits(None, subject("CN=Smith\\, J,O=Example").as_ref()));
        assert!(!escaped.admits(None, subject("CN=Smith,J,O=Example").as_ref()));
        let addressed = Access::parse(&strings(&["10.0.0.0/8"]), &[], "").unwrap();
        let both = addressed.with_identities(&strings(&["CN=alice"]), "x", false).unwrap();
        assert!(
            !both.admits(Some("192.168.0.1".parse().unwrap()), subject("CN=alice").as_ref()),
            "the address still counts"
        );
        assert!(Access::default().admits(None, None), "no list admits anyone");
        let err = Access::default()
            .with_identities(&strings(&["CN=alice", "alice"]), "export[0].tls_identities", false)
            .unwrap_err();
        assert!(
            err.to_string().starts_with("export[0].tls_identities[1]: \"alice\" is not a distinguished name"),
            "{err}"
        );
        let backslash = Access::default().with_identities(&strings(&["CN=a\\\\,O=Example"]), "x", false).unwrap();
        assert!(backslash.admits(None, subject("O=Example,CN=a\\\\").as_ref()), "an escaped backslash ends the value");
    }

    #[test]
    fn psk_users_are_matched_by_name_and_never_as_subjects() {
        let a = Access::default().with_identities(&["alice".to_string()], "x", true).unwrap();
        assert!(a.admits(None, Some(&Identity::PskUser("alice".into()))));
        assert!(!a.admits(None, Some(&Identity::PskUser("bob".into()))));
        assert!(!a.admits(None, Some(&Identity::Subject("CN=alice".into()))));
        assert!(!a.admits(None, None));
        let err = Access::default().with_identities(&[String::new()], "x", true).unwrap_err();
        assert!(err.to_string().starts_with("x[0]:"), "{err}");
    }
}
