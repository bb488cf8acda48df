//! Naming devices: the built-in presets or the user's own, described in
//! TOML:
//!
//! ```toml
//! [device.archive]
//! latency_ns = 12000000
//! bytes_per_sec = 90000000
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use hearth_estimate::device::Device;
use serde::Deserialize;

use crate::TierError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFile {
    #[serde(default)]
    pub device: BTreeMap<String, Device>,
}

impl DeviceFile {
    /// Parses TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<DeviceFile, TierError> {
        let file: DeviceFile = toml::from_str(text).map_err(|e| TierError::file(Path::new(origin), e))?;
        for (name, d) in &file.device {
            if d.bytes_per_sec == 0 {
                return Err(TierError::DeviceSpeed { origin: origin.to_string(), name: name.clone() });
            }
        }
        Ok(file)
    }

    pub fn load(path: &Path) -> Result<DeviceFile, TierError> {
        let text = std::fs::read_to_string(path).map_err(|e| TierError::file(path, e))?;
        DeviceFile::parse(&text, &path.display().to_string())
    }

    /// A device by name: the file's own first, then the presets (hdd, ssd, nvme).
    pub fn get(&self, name: &str) -> Result<Device, TierError> {
        self.device.get(name).copied().or_else(|| Device::preset(name)).ok_or_else(|| {
            let mut known: Vec<&str> = vec!["hdd", "ssd", "nvme"];
            known.extend(self.device.keys().map(String::as_str));
            TierError::UnknownDevice { name: name.to_string(), known: known.join(", ") }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_devices_and_presets() {
        let f =
            DeviceFile::parse("[device.archive]\nlatency_ns = 12000000\nbytes_per_sec = 90000000\n", "t.toml").unwrap();
        assert_eq!(f.get("archive").unwrap(), Device { latency_ns: 12_000_000, bytes_per_sec: 90_000_000 });
        assert_eq!(f.get("nvme").unwrap(), Device::NVME);
        assert!(f.get("tape").unwrap_err().to_string().contains("archive"));
    }

    #[test]
    fn bad_files_name_the_place() {
        let err =
            DeviceFile::parse("[device.x]\nlatency_ns = 1\nbytes_per_second = 2\n", "d.toml").unwrap_err().to_string();
        assert!(err.starts_with("d.toml:") && err.contains("bytes_per_second") && err.contains("line 3"), "{err}");
        let err =
            DeviceFile::parse("[device.x]\nlatency_ns = 1\nbytes_per_sec = 0\n", "d.toml").unwrap_err().to_string();
        assert!(err.contains("\"x\"") && err.contains("positive"), "{err}");
    }
}
