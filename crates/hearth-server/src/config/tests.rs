use super::*;

#[test]
fn full_config_parses_and_validates() {
    let c = Config::parse(
        r#"
        [server]
        listen = ["127.0.0.1:0"]
        unix = ["/tmp/h.sock"]
        metrics = "127.0.0.1:0"

        [[export]]
        name = "disk"
        backend = "memory"
        size = "8MiB"
        cache_size = 1048576
        policy = "lru"
        block_size = "4KiB"
        write_mode = "back"
        dirty_limit = "256KiB"
        latency = "1ms"
        bandwidth = "100MiB"
        "#,
    )
    .unwrap();
    let settings = c.validate().unwrap();
    assert_eq!(settings.server.listen, ["127.0.0.1:0"]);
    let e = &settings.exports[0];
    assert_eq!(e.write_mode, crate::cache::CacheMode::Back { dirty_limit: 256 << 10 });
    assert_eq!(e.latency, Duration::from_millis(1));
    assert_eq!((e.block_size, e.cache_bytes, e.bandwidth), (4096, 1 << 20, Some(100 << 20)));
    assert_eq!(e.backend, BackendSpec::Memory { size: 8 << 20 });
    let (cache, ..) = e.open().unwrap();
    assert_eq!(cache.size(), 8 << 20);
}

#[test]
fn bandwidths_are_rates_and_sizes_without_per_second_still_read() {
    let bandwidth = |value: &str| {
        let text = format!("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nbandwidth = {value}\n");
        Config::parse(&text).unwrap().validate().map(|s| s.exports[0].bandwidth).map_err(|e| e.to_string())
    };
    assert_eq!(bandwidth("\"250MB/s\""), Ok(Some(250_000_000)));
    assert_eq!(bandwidth("\"100MiB/s\""), Ok(Some(100 << 20)));
    assert_eq!(bandwidth("\"100MiB\""), Ok(Some(100 << 20)), "as configs were first written");
    assert_eq!(bandwidth("1000000"), Ok(Some(1_000_000)), "an integer is bytes per second");
    let err = bandwidth("\"100\"").unwrap_err();
    assert!(err.contains("bandwidth") && err.contains("write 100MB/s or 100MiB/s"), "{err}");
}

#[test]
fn errors_name_the_key() {
    let e = Config::parse("[[export]]\nname = \"a\"\ncache = \"1MiB\"\n").unwrap_err().to_string();
    assert!(e.starts_with("line 3, column 1 (cache = \"1MiB\"): unknown field `cache`") && !e.contains('\n'), "{e}");
    let c =
        Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nblock_size = 1000\n").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.starts_with("export[0] (\"a\").block_size:"), "{e}");
    let c =
        Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\npolicy = \"nope\"\n").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains(".policy:"));
    let c = Config::parse("[[export]]\nname = \"a\"\nbackend = \"sparse\"\nsize = \"1MiB\"\n").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains(".path: required"));
    let c = Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nlatency = \"3 parsecs\"\n")
        .unwrap();
    assert!(c.validate().unwrap_err().to_string().contains(".latency:"));
    let e = Config::parse("[[export]]\nname = \"a\"\nbackend = \"tape\"\n").unwrap_err().to_string();
    assert!(e.contains("tape"), "{e}");
    let c = Config::parse("").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("no [[export]]"));
}

/// Found by fuzzing (fuzz/regressions/server_config): each panicked or
/// tried to allocate 64 GB inside `validate`.
#[test]
fn fuzzed_configs_are_errors_not_panics() {
    for (value, key) in [
        ("latency = \"18446744073709551616s\"", ".latency:"),
        ("latency = \"27777777777777777777s\"", ".latency:"),
        ("policy = \"fbr:cmax=4000000000\"", ".policy:"),
    ] {
        let c = Config::parse(&format!("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = 1\n{value}\n")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(key), "{value}: {e}");
    }
}

/// `adaptive_partition` sizes the prefetch partition, so a file that asks
/// for it without a prefetcher is refused, naming the key.
#[test]
fn an_adaptive_partition_needs_a_prefetcher() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nadaptive_partition = true\n";
    let error = Config::parse(export).unwrap().validate().unwrap_err().to_string();
    assert_eq!(
        error,
        "export[0] (\"a\").adaptive_partition: needs prefetch: only prefetched blocks enter the partition"
    );
    for prefetch in ["quickmine", "none"] {
        let with = Config::parse(&format!("{export}prefetch = \"{prefetch}\"\n")).unwrap().validate();
        assert!(with.is_ok(), "prefetch = {prefetch:?}: {:?}", with.err());
    }
}

/// The prefetcher is parsed and its values checked by its registry row
/// when the file is validated, without building one.
#[test]
fn a_prefetcher_is_checked_when_the_file_is_validated() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let validate = |prefetch: &str| Config::parse(&format!("{export}prefetch = \"{prefetch}\"\n")).unwrap().validate();
    let error = |prefetch: &str| validate(prefetch).unwrap_err().to_string();
    assert_eq!(error("quickmine:g=0"), "export[0] (\"a\").prefetch: quickmine: g must be at least 1, got 0");
    assert_eq!(
        error("mithril:min-support=9"),
        "export[0] (\"a\").prefetch: mithril: max-support must be at least min-support"
    );
    assert!(error("seq:depth=3").ends_with("prefetcher seq:depth=3 has no parameter \"depth\" (known: max)"));
    let settings = validate(" QuickMine : g=3").unwrap();
    assert_eq!(settings.exports[0].prefetch.as_ref().map(ToString::to_string).as_deref(), Some("quickmine:g=3"));
    assert_eq!(validate("none").unwrap().exports[0].prefetch, None);
}

#[test]
fn dirty_max_age_defaults_for_write_back_and_is_refused_for_write_through() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let age = |extra: &str| {
        Config::parse(&format!("{export}{extra}")).unwrap().validate().map(|s| s.exports[0].dirty_max_age)
    };
    assert_eq!(age("").unwrap(), Some(DEFAULT_DIRTY_MAX_AGE), "for a switch to write-back while serving");
    assert_eq!(age("write_mode = \"back\"\n").unwrap(), Some(DEFAULT_DIRTY_MAX_AGE));
    assert_eq!(age("write_mode = \"back\"\ndirty_max_age = \"2s\"\n").unwrap(), Some(Duration::from_secs(2)));
    assert_eq!(age("write_mode = \"back\"\ndirty_max_age = \"0s\"\n").unwrap(), None);
    let e = age("dirty_max_age = \"2s\"\n").unwrap_err().to_string();
    assert!(e.contains(".dirty_max_age: only used with write_mode"), "{e}");
    let e = age("write_mode = \"back\"\ndirty_max_age = \"soon\"\n").unwrap_err().to_string();
    assert!(e.contains(".dirty_max_age:"), "{e}");
}

#[test]
fn an_export_connection_limit_must_be_positive() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let limit = |v: &str| Config::parse(&format!("{export}max_connections = {v}\n")).unwrap().validate();
    assert_eq!(limit("3").unwrap().exports[0].max_connections, Some(3));
    assert!(limit("0").unwrap_err().to_string().contains(".max_connections: must be positive"));
}

#[test]
fn the_offline_bound_is_not_a_server_policy() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let e = Config::parse(&format!("{export}policy = \"opt\"\n")).unwrap().validate().unwrap_err().to_string();
    assert!(e.contains(".policy: opt is an offline bound"), "{e}");
}

#[test]
fn timeouts_take_durations_as_the_flags_do_and_bare_seconds_as_before() {
    let timeouts = |text: &str| {
        Config::parse(&format!("[server]\n{text}\n")).map(|c| (c.server.handshake_timeout, c.server.idle_timeout))
    };
    assert_eq!(timeouts("handshake_timeout = \"10s\"\nidle_timeout = \"2m\"").unwrap(), (10, 120));
    assert_eq!(timeouts("handshake_timeout = 10").unwrap(), (10, 0));
    assert_eq!(timeouts("").unwrap(), (default_handshake_timeout(), 0));
    let e = timeouts("handshake_timeout = \"1500ms\"").unwrap_err().to_string();
    assert!(e.contains("handshake_timeout") && e.contains("whole seconds"), "{e}");
    let e = timeouts("idle_timeout = \"5\"").unwrap_err().to_string();
    assert!(e.contains("idle_timeout") && e.contains("no unit"), "{e}");
}

#[test]
fn cache_device_keys_are_checked_and_open_a_device_under_the_ram_cache() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk.img");
    let device = dir.path().join("cache.dev");
    let export =
        format!("[[export]]\nname = \"a\"\nbackend = \"sparse\"\nsize = \"1MiB\"\npath = \"{}\"\n", disk.display());
    let spec = |extra: &str| Config::parse(&format!("{export}{extra}")).unwrap().validate();
    let with_device = format!("cache_device = \"{}\"\ncache_device_size = \"256KiB\"\n", device.display());
    let settings = spec(&format!("{with_device}cache_device_write_mode = \"back\"\ndirty_max_age = \"2s\"\n")).unwrap();
    let d = settings.exports[0].cache_device.as_ref().unwrap();
    assert_eq!((d.size, d.mode, d.dirty_max_age), (256 << 10, DeviceWriteMode::Back, Some(Duration::from_secs(2))));
    let (cache, opened, _) = settings.exports[0].open().unwrap();
    assert!(cache.describe_backend().contains("under cache device"), "{}", cache.describe_backend());
    assert!(opened.is_some());
    assert!(spec(&with_device).unwrap().exports[0]
        .cache_device
        .as_ref()
        .is_some_and(|d| d.mode == DeviceWriteMode::Through));

    let err = |extra: &str| spec(extra).unwrap_err().to_string();
    let e = err(&format!("cache_device = \"{}\"\n", device.display()));
    assert!(e.contains(".cache_device_size: required with cache_device"), "{e}");
    let e = err("cache_device_write_mode = \"back\"\n");
    assert!(e.contains(".cache_device_write_mode: needs cache_device"), "{e}");
    let e = err(&format!("cache_device = \"{}\"\ncache_device_size = 1\n", disk.display()));
    assert!(e.contains(".cache_device: ") && e.contains("own backend"), "{e}");
    let e = Config::parse(&format!("[[export]]\nname = \"m\"\nbackend = \"memory\"\nsize = \"1MiB\"\n{with_device}"))
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains(".cache_device: ") && e.contains("memory"), "{e}");
}

#[test]
fn verify_peer_needs_required_tls() {
    let config = |tls: &str| {
        let text = format!(
            "[server]\ntls = \"{tls}\"\ntls_certificates = \"/pki\"\ntls_verify_peer = true\n\
             [[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n"
        );
        Config::parse(&text).unwrap().validate()
    };
    let e = config("on").unwrap_err().to_string();
    assert!(e.starts_with("server.tls_verify_peer: needs server.tls = \"require\""), "{e}");
    assert!(config("require").is_ok());
}

#[test]
fn psk_needs_required_tls() {
    let config = |tls: &str| {
        let text = format!(
            "[server]\ntls = \"{tls}\"\ntls_psk = \"/keys.psk\"\n\
             [[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n"
        );
        Config::parse(&text).unwrap().validate()
    };
    let e = config("on").unwrap_err().to_string();
    assert!(e.starts_with("server.tls_psk: needs server.tls = \"require\""), "{e}");
    assert!(config("require").is_ok());
}

#[test]
fn upstream_timeout_is_a_positive_duration_for_remote_backends() {
    let nbd = "[[export]]\nname = \"a\"\nbackend = \"nbd\"\nupstream = \"nbd://storage/disk\"\n";
    let timeout = |export: &str, extra: &str| {
        Config::parse(&format!("{export}{extra}")).unwrap().validate().map(|s| s.exports[0].upstream_timeout)
    };
    assert_eq!(timeout(nbd, "").unwrap(), crate::backend::upstream::DEFAULT_TIMEOUT);
    assert_eq!(timeout(nbd, "upstream_timeout = \"1500ms\"\n").unwrap(), Duration::from_millis(1500));
    let e = timeout(nbd, "upstream_timeout = \"0s\"\n").unwrap_err().to_string();
    assert!(e.contains(".upstream_timeout: must be positive"), "{e}");
    let e = timeout(nbd, "upstream_timeout = \"30\"\n").unwrap_err().to_string();
    assert!(e.contains(".upstream_timeout:") && e.contains("no unit"), "{e}");
    let memory = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let e = timeout(memory, "upstream_timeout = \"5s\"\n").unwrap_err().to_string();
    assert!(e.contains(".upstream_timeout: only for backends"), "{e}");
}

#[test]
fn trim_is_on_unless_the_export_says_trim_false() {
    let export = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n";
    let trim =
        |extra: &str| Config::parse(&format!("{export}{extra}")).unwrap().validate().unwrap().exports[0].options.trim;
    assert!(trim(""));
    assert!(!trim("trim = false\n"));
    let e = Config::parse(&format!("{export}trim = \"no\"\n")).unwrap_err().to_string();
    assert!(e.starts_with("line 5, column 8 (trim = \"no\"): invalid type"), "{e}");
}
