//! Who may connect, by client address: the server's allow and deny lists
//! (checked at accept) and each export's allow list (an export a client may
//! not use is invisible to it: not listed, and unknown to GO and INFO).
//!
//! Entries are CIDR blocks (`10.0.0.0/8`, `fd00::/8`) or single addresses.
//! IPv4 clients reaching an IPv6 listener are matched as IPv4. Unix-socket
//! clients have no address: the socket file's permissions govern them.

use std::net::IpAddr;

use ipnet::IpNet;

/// An allow list and a deny list; an empty allow list allows everyone.
#[derive(Clone, Debug, Default)]
pub struct Access {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
}

impl Access {
    /// Parses both lists; an error names the bad entry's list and index.
    pub fn parse(allow: &[String], deny: &[String], key: &str) -> Result<Access, String> {
        let nets = |list: &[String], name: &str| {
            list.iter()
                .enumerate()
                .map(|(i, s)| parse_net(s).map_err(|e| format!("{key}{name}[{i}]: {e}")))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Access { allow: nets(allow, "allow")?, deny: nets(deny, "deny")? })
    }

    /// Whether a client at `ip` (`None`: a Unix socket) may connect.
    pub fn permits(&self, ip: Option<IpAddr>) -> bool {
        let Some(ip) = ip.map(|ip| ip.to_canonical()) else { return true };
        (self.allow.is_empty() || self.allow.iter().any(|n| n.contains(&ip)))
            && !self.deny.iter().any(|n| n.contains(&ip))
    }
}

fn parse_net(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{s:?} is not an address or a CIDR block such as 10.0.0.0/8"))
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
        assert!(err.starts_with("server.allow[1]: \"ten\" is not an address"), "{err}");
    }
}
