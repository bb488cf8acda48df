//! `--backend http`: the cache in front of a file on a real web server
//! (nginx, which answers byte ranges). Reads come through byte-identical,
//! cached blocks are not fetched again, writes are refused, and a web
//! server that restarts costs a retry, not an error. Upstreams refused at
//! start are the binary's: crates/hearth/tests/serve_http.rs.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hearth_client::Client;
use hearth_server::config::{Config, ExportConfig};
use serve_support::{export, free_port, metric, on_unix, pattern, run, scrape, wait_for_port, Server};

const SIZE: usize = 4 << 20;

/// Whether nginx is installed (it answers `-v`, not `--version`).
fn have_nginx() -> bool {
    let found = Command::new("nginx").arg("-v").stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("nginx is required under CI=true but is not installed");
        }
        eprintln!("skipped: nginx not installed");
    }
    found
}

/// nginx in the foreground, one process, serving `root` on `port`.
struct Nginx {
    child: Child,
    access_log: PathBuf,
}

impl Nginx {
    fn start(dir: &Path, root: &Path, port: u16) -> Nginx {
        let d = dir.display();
        let access_log = dir.join("access.log");
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
                 events {{}}\n\
                 http {{ access_log {}; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
                 fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
                 server {{ listen 127.0.0.1:{port}; root {}; }} }}\n",
                access_log.display(),
                root.display()
            ),
        )
        .unwrap();
        let child = Command::new("nginx")
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nginx");
        wait_for_port(port, || {
            format!(
                "nginx did not listen on {port}: {}",
                std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
            )
        });
        Nginx { child, access_log }
    }

    /// Range requests nginx has answered with 206 so far.
    fn ranges_served(&self) -> usize {
        std::fs::read_to_string(&self.access_log).unwrap_or_default().lines().filter(|l| l.contains("\" 206 ")).count()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    dir: tempfile::TempDir,
    www: PathBuf,
    data: Vec<u8>,
    port: u16,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    let data = pattern(SIZE, 23);
    std::fs::write(www.join("disk.img"), &data).unwrap();
    Setup { dir, www, data, port: free_port() }
}

fn serve(s: &Setup, cache_size: &str) -> Server {
    let url = format!("http://127.0.0.1:{}/disk.img", s.port);
    let socket = s.dir.path().join("hearth.sock");
    let flags = ["--backend", "http", "--upstream", &url, "--cache-size", cache_size];
    let mut server = on_unix(&socket);
    server.metrics = Some("127.0.0.1:0".to_string());
    // `--read-only` is the binary's flag for the config's `read_only`.
    let export = ExportConfig { read_only: true, ..export("hearth", &flags) };
    Server::start(Config { server, exports: vec![export] })
}

#[test]
fn reads_come_through_byte_identical_and_hits_stay_home() {
    if !have_nginx() || !serve_support::have("nbdcopy") || !serve_support::have("nbdinfo") {
        return;
    }
    let s = setup();
    let nginx = Nginx::start(s.dir.path(), &s.www, s.port);
    let server = serve(&s, "8MiB");
    let uri = server.uri("hearth");
    let out = run(Command::new("nbdinfo").arg(&uri));
    assert!(out.contains(&format!("export-size: {SIZE}")) && out.contains("is_read_only: true"), "{out}");

    let copy = s.dir.path().join("copy.bin");
    run(Command::new("nbdcopy").arg(&uri).arg(&copy));
    assert!(std::fs::read(&copy).unwrap() == s.data, "the bytes through the cache differ from the web server's");
    // The whole file is cached now: reading it again asks nginx for nothing.
    let fetched = nginx.ranges_served();
    std::fs::remove_file(&copy).unwrap();
    run(Command::new("nbdcopy").arg(&uri).arg(&copy));
    assert!(std::fs::read(&copy).unwrap() == s.data);
    assert_eq!(nginx.ranges_served(), fetched, "cached blocks were fetched again");
    let page = scrape(server.metrics.as_ref().unwrap());
    assert!(metric(&page, "hearth_cache_hits_total") >= (SIZE / 4096) as f64, "{page}");

    // A read-only export: the write is refused, the file and the cache unchanged.
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    let refused = client.write(0, &[0x5a; 4096], false).unwrap_err();
    assert!(refused.to_string().starts_with("NBD error 1 "), "EPERM expected: {refused}");
    assert_eq!(client.read(0, 4096).unwrap(), s.data[..4096]);
    assert!(std::fs::read(s.www.join("disk.img")).unwrap() == s.data);
}

#[test]
fn a_web_server_restart_costs_a_retry_not_an_error() {
    if !have_nginx() {
        return;
    }
    let s = setup();
    let nginx = Nginx::start(s.dir.path(), &s.www, s.port);
    // No cache: every read reaches the web server.
    let server = serve(&s, "0");
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    assert_eq!(client.read(0, 65536).unwrap(), s.data[..65536]);
    drop(nginx);
    let at = 3 << 20;
    let reader = std::thread::spawn(move || {
        let data = client.read(at, 65536);
        (client, data)
    });
    std::thread::sleep(Duration::from_millis(700));
    let _nginx = Nginx::start(s.dir.path(), &s.www, s.port);
    let (_, across) = reader.join().unwrap();
    let across = across.unwrap_or_else(|e| panic!("read across the restart: {e}\n{}", server.log_text()));
    assert_eq!(across, s.data[at as usize..at as usize + 65536]);
    let log = server.log_text();
    // One line when the upstream goes away and one when it returns, not one per retry.
    assert_eq!(log.matches("upstream unavailable; requests retry until their deadline").count(), 1, "{log}");
    assert_eq!(log.matches("upstream available again").count(), 1, "{log}");
}
