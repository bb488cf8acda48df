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
//! matter. A client without a verified certificate has no identity.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::{AccessError, EntryProblem};

/// An allow list and a deny list; an empty allow list allows everyone.
/// Exports may add the TLS identities they admit (empty: any client).
#[derive(Clone, Debug, Default)]
pub struct Access {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    /// Distinguished names, each as its attributes in RFC 4514 order.
    identities: Vec<Vec<String>>,
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

    /// Admits only clients whose TLS identity is one of `names`; an error
    /// names the bad entry (`{key}[i]`).
    pub fn with_identities(mut self, names: &[String], key: &str) -> Result<Access, AccessError> {
        self.identities = names
            .iter()
            .enumerate()
            .map(|(i, s)| parse_name(s).map_err(|problem| AccessError { entry: format!("{key}[{i}]"), problem }))
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether only certain TLS identities are admitted.
    pub fn wants_identity(&self) -> bool {
        !self.identities.is_empty()
    }

    /// Whether a client at `ip` with the TLS `identity` (an RFC 4514 name,
    /// `None` without a verified certificate) may use what this guards.
    pub fn admits(&self, ip: Option<IpAddr>, identity: Option<&str>) -> bool {
        self.permits(ip)
            && (self.identities.is_empty()
                || identity.and_then(|name| parse_name(name).ok()).is_some_and(|name| {
                    self.identities.iter().any(|allowed| {
                        *allowed == name || (allowed.len() == name.len() && allowed.iter().eq(name.iter().rev()))
                    })
                }))
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
        // A comma escaped with a backslash belongs to the value.
        let end =
            rest.char_indices().find(|&(i, c)| c == ',' && !rest[..i].ends_with('\\')).map_or(rest.len(), |(i, _)| i);
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
        let a = Access::default().with_identities(&strings(&["CN=alice,O=Example Org,C=GB"]), "x").unwrap();
        assert!(a.wants_identity());
        assert!(a.admits(None, Some("CN=alice,O=Example Org,C=GB")));
        assert!(a.admits(None, Some("c = GB, o = Example Org, cn = alice")), "openssl's default order");
        assert!(!a.admits(None, Some("CN=alice,O=Example Org")), "a different name");
        assert!(!a.admits(None, Some("CN=bob,O=Example Org,C=GB")));
        assert!(!a.admits(None, None), "no certificate, no identity");
        assert!(!a.admits(None, Some("O=Example Org,CN=alice,C=GB")), "order is more than a set");
        let escaped = Access::default().with_identities(&strings(&["CN=Smith\\, J,O=Example"]), "x").unwrap();
        assert!(escaped.admits(None, Some("CN=Smith\\, J,O=Example")));
        assert!(!escaped.admits(None, Some("CN=Smith,J,O=Example")));
        let addressed = Access::parse(&strings(&["10.0.0.0/8"]), &[], "").unwrap();
        let both = addressed.with_identities(&strings(&["CN=alice"]), "x").unwrap();
        assert!(!both.admits(Some("192.168.0.1".parse().unwrap()), Some("CN=alice")), "the address still counts");
        assert!(Access::default().admits(None, None), "no list admits anyone");
        let err = Access::default()
            .with_identities(&strings(&["CN=alice", "alice"]), "export[0].tls_identities")
            .unwrap_err();
        assert!(
            err.to_string().starts_with("export[0].tls_identities[1]: \"alice\" is not a distinguished name"),
            "{err}"
        );
    }
}
