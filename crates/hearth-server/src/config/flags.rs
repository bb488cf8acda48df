//! The two export keys whose flags are switches rather than `--key VALUE`:
//! `write_mode` is `--write-back`, `--write-around` or `--pass-through`
//! (write-through when none is given), `cache_device_write_mode = "back"`
//! is `--cache-device-write-back`. Written by hand, as clap derives `Args`
//! for structs only; [`ExportConfig`](super::ExportConfig) flattens them.

use clap::{Arg, ArgAction, ArgGroup, ArgMatches, Args, Command, FromArgMatches, Id};

use super::WriteModeConfig;
use crate::cache_device::DeviceWriteMode;

const WRITE_BACK: &str = "write_back";
const WRITE_AROUND: &str = "write_around";
const PASS_THROUGH: &str = "pass_through";
const DEVICE_WRITE_BACK: &str = "cache_device_write_back";

/// `--long`: a switch whose id is `long` with underscores.
fn switch(id: &'static str, long: &'static str, help: &'static str) -> Arg {
    Arg::new(id).long(long).action(ArgAction::SetTrue).help(help)
}

impl FromArgMatches for WriteModeConfig {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(match (matches.get_flag(WRITE_BACK), matches.get_flag(WRITE_AROUND), matches.get_flag(PASS_THROUGH)) {
            (true, _, _) => WriteModeConfig::Back,
            (false, true, _) => WriteModeConfig::Around,
            (false, false, true) => WriteModeConfig::Pass,
            (false, false, false) => WriteModeConfig::Through,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for WriteModeConfig {
    fn group_id() -> Option<Id> {
        Some(Id::from("WriteModeConfig"))
    }

    fn augment_args(cmd: Command) -> Command {
        cmd.arg(switch(WRITE_BACK, "write-back", "Write-back instead of write-through"))
            .arg(
                switch(
                    WRITE_AROUND,
                    "write-around",
                    "Write-around instead of write-through: writes go to the backend and drop the blocks they \
                     touch from the cache, so only reads fill it",
                )
                .conflicts_with(WRITE_BACK),
            )
            .arg(
                switch(
                    PASS_THROUGH,
                    "pass-through",
                    "Pass-through: nothing enters the cache (reads of uncached blocks and writes go to the \
                     backend; writes drop cached copies), until a switch to another mode (--admin)",
                )
                .conflicts_with_all([WRITE_BACK, WRITE_AROUND]),
            )
            .group(ArgGroup::new("WriteModeConfig").args([WRITE_BACK, WRITE_AROUND, PASS_THROUGH]).multiple(true))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Flattened as `Option<DeviceWriteMode>`: `None` unless the switch is given.
impl FromArgMatches for DeviceWriteMode {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(if matches.get_flag(DEVICE_WRITE_BACK) { DeviceWriteMode::Back } else { DeviceWriteMode::Through })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for DeviceWriteMode {
    fn group_id() -> Option<Id> {
        Some(Id::from("DeviceWriteMode"))
    }

    fn augment_args(cmd: Command) -> Command {
        cmd.arg(
            switch(
                DEVICE_WRITE_BACK,
                "cache-device-write-back",
                "Writes land on the cache device as dirty blocks, cleaned to the backend after \
                 --dirty-max-age, instead of writing through to the backend",
            )
            .requires("cache_device"),
        )
        .group(ArgGroup::new("DeviceWriteMode").arg(DEVICE_WRITE_BACK))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl super::SizeValue {
    /// A rate flag's value (`--bandwidth`), checked as the flag is read: a
    /// missing unit is named before any rule between flags.
    pub fn rate_flag(text: &str) -> Result<super::SizeValue, hearth_core::ValueError> {
        super::SizeValue::Text(text.to_string()).rate().map(super::SizeValue::Bytes)
    }
}
