//! Where an NBD client command connects: `nbd://HOST[:PORT]/EXPORT` or
//! `nbd+unix:///EXPORT?socket=PATH`, the URIs fio, nbdinfo and qemu take.

use std::path::PathBuf;

use hearth_client::Client;

/// Where to connect.
pub enum Target {
    Tcp { addr: String, export: String },
    Unix { path: PathBuf, export: String },
}

impl Target {
    pub fn parse(uri: &str) -> anyhow::Result<Target> {
        let bad = || anyhow::anyhow!("{uri:?}: expected nbd://HOST:PORT/EXPORT or nbd+unix:///EXPORT?socket=PATH");
        if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path_part, query) = rest.split_once('?').ok_or_else(bad)?;
            let export = path_part.strip_prefix('/').unwrap_or(path_part).to_string();
            let socket = query.split('&').find_map(|kv| kv.strip_prefix("socket=")).ok_or_else(bad)?;
            return Ok(Target::Unix { path: PathBuf::from(socket), export });
        }
        let rest = uri.strip_prefix("nbd://").ok_or_else(bad)?;
        let (addr, export) = rest.split_once('/').unwrap_or((rest, ""));
        if addr.is_empty() {
            return Err(bad());
        }
        let addr = if addr.contains(':') { addr.to_string() } else { format!("{addr}:10809") };
        Ok(Target::Tcp { addr, export: export.to_string() })
    }

    pub fn connect(&self) -> std::io::Result<Client> {
        match self {
            Target::Tcp { addr, export } => Client::connect_tcp(addr, export),
            Target::Unix { path, export } => Client::connect_unix(path, export),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_uris_parse() {
        let Target::Tcp { addr, export } = Target::parse("nbd://127.0.0.1:10810/disk").unwrap() else { panic!() };
        assert_eq!((addr.as_str(), export.as_str()), ("127.0.0.1:10810", "disk"));
        let Target::Tcp { addr, .. } = Target::parse("nbd://localhost").unwrap() else { panic!() };
        assert_eq!(addr, "localhost:10809");
        let Target::Unix { path, export } = Target::parse("nbd+unix:///d?socket=/tmp/s.sock").unwrap() else {
            panic!()
        };
        assert_eq!((path, export.as_str()), (PathBuf::from("/tmp/s.sock"), "d"));
        for bad in ["http://x/y", "nbd+unix:///d", "nbd:///d"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
