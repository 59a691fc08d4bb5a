//! Test servers on loopback for the remote-store tests: s3s-fs (S3), a GCS server
//! (`scripts/gcs_server.py`, with generations), nginx with WebDAV
//! (HTTP with PROPFIND listing) or without (a server that cannot list), and the
//! fault-injecting proxy of `scripts/fault_proxy.py`. Ports are picked free; every server
//! is ended by its own PID on drop; its log is kept (and named) when the test fails.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

/// Where `scripts/test.sh` installs s3s-fs (override: `$ZARRFS_S3S_FS`).
pub fn s3s_fs_binary() -> PathBuf {
    let path = std::env::var_os("ZARRFS_S3S_FS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::repo().join("target/tools/bin/s3s-fs"));
    assert!(
        path.is_file(),
        "s3s-fs is missing at {}: run scripts/test.sh (it installs it)",
        path.display()
    );
    path
}

/// A port of 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// Waits up to 30 s for `child` to listen on `port`: Err with what ended it otherwise.
fn wait_listening(port: u16, child: &mut Child, what: &str, log: &Path) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{what} exited ({status}) before listening on 127.0.0.1:{port}; log {}:\n{}",
                log.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "{what} is not listening on 127.0.0.1:{port} after 30 s; log {}:\n{}",
        log.display(),
        std::fs::read_to_string(log).unwrap_or_default()
    ))
}

/// A server process, ended (by its PID) when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    name: String,
    dir: Option<TempDir>,
    /// Held by an Azurite server for its life: the emulator's address is process-wide
    /// (the environment), so the suites of this binary take turns with it.
    _env: Option<std::sync::MutexGuard<'static, ()>>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's folder (config, logs).
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map(TempDir::path)
            .unwrap_or(Path::new("/"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Some(dir) = self.dir.take() {
                let kept = dir.path().to_path_buf();
                std::mem::forget(dir);
                eprintln!("{}: logs kept in {}", self.name, kept.display());
            }
        }
    }
}

/// Starts the server that `command` makes for a free port and the server's folder,
/// and waits until it listens. A port is free only until someone takes it: a server that
/// exits before listening is started again on another port, three times at most.
fn spawn(name: &str, dir: TempDir, command: impl Fn(u16, &Path) -> Command) -> Server {
    let log = dir.path().join("server.log");
    let mut failures = Vec::new();
    for _ in 0..3 {
        let port = free_port();
        let file = std::fs::File::create(&log).expect("server log");
        let mut child = command(port, dir.path())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        match wait_listening(port, &mut child, name, &log) {
            Ok(()) => {
                return Server {
                    _env: None,
                    child,
                    port,
                    name: name.to_string(),
                    dir: Some(dir),
                }
            }
            Err(e) => {
                eprintln!("{e}");
                failures.push(e);
            }
        }
    }
    let kept = dir.path().to_path_buf();
    std::mem::forget(dir);
    panic!(
        "{name} did not start (its folder is kept in {}):\n{}",
        kept.display(),
        failures.join("\n")
    );
}

/// Azurite's blob service (the Azure Storage emulator, its data in the server's folder), installed by
/// scripts/test.sh. Its development account is `devstoreaccount1`: see [`azurite_put`].
pub fn azurite() -> Server {
    let bin = crate::common::repo().join("target/tools/azurite/node_modules/.bin/azurite-blob");
    assert!(
        bin.is_file(),
        "azurite is missing at {}: run scripts/test.sh (it installs it)",
        bin.display()
    );
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let mut server = spawn("azurite", TempDir::new("azurite"), |port, dir| {
        let mut command = Command::new(&bin);
        command
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(port.to_string())
            .args(["--skipApiVersionCheck", "--location"])
            .arg(dir);
        command
    });
    // Where object_store looks for the emulator (the mounts inherit it).
    std::env::set_var("AZURITE_BLOB_STORAGE_URL", server.url());
    server._env = Some(env);
    server
}

/// How many times [`azurite_put`] tries its upload (each put is idempotent).
const AZURITE_PUT_TRIES: u32 = 3;

/// Put folder `dir` into container `container` of `azurite` under `prefix`
/// (scripts/azurite_upload.py). A failed upload is printed (its stderr) and tried again,
/// three times in all; the last one's stderr fails the test.
pub fn azurite_put(azurite: &Server, container: &str, dir: &Path, prefix: &str) {
    let python = super::venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let mut failure = String::new();
    for attempt in 1..=AZURITE_PUT_TRIES {
        let out = Command::new(&python)
            .arg(crate::common::repo().join("scripts/azurite_upload.py"))
            .arg(format!("{}/devstoreaccount1", azurite.url()))
            .arg(container)
            .arg(dir)
            .arg(prefix)
            .stdin(Stdio::null())
            .output()
            .expect("run azurite_upload.py");
        if out.status.success() {
            return;
        }
        failure = format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        eprintln!("azurite_upload.py, attempt {attempt} of {AZURITE_PUT_TRIES}: {failure}");
        if attempt < AZURITE_PUT_TRIES {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    panic!(
        "azurite_upload.py failed {AZURITE_PUT_TRIES} times; the last: {failure}\nazurite's log:\n{}",
        super::tail(&azurite.log(), 4000)
    );
}

/// s3s-fs serving `root` (bucket = first-level folder) with `keys`, or anonymously.
pub fn s3s_fs(root: &Path, keys: Option<(&str, &str)>) -> Server {
    let binary = s3s_fs_binary();
    spawn("s3s-fs", TempDir::new("s3s"), |port, _| {
        let mut command = Command::new(&binary);
        command
            .arg("--host")
            .arg("127.0.0.1")
            .arg("--port")
            .arg(port.to_string());
        if let Some((access, secret)) = keys {
            command
                .arg("--access-key")
                .arg(access)
                .arg("--secret-key")
                .arg(secret);
        }
        command.arg(root);
        command
    })
}

/// The service account file in a [`gcs`] server's folder that object_store's GCS client
/// takes for an emulator (`disable_oauth`: requests carry an empty bearer token).
pub const GCS_KEY: &str = "key.json";

/// scripts/gcs_server.py serving `root` (bucket = first-level folder) through GCS's XML
/// API, with object generations and conditional puts; it takes any credentials (see
/// [`GCS_KEY`]).
pub fn gcs(root: &Path) -> Server {
    let dir = TempDir::new("gcs");
    std::fs::write(
        dir.path().join(GCS_KEY),
        r#"{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#,
    )
    .expect("the GCS key file");
    let python = super::venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    spawn("gcs_server.py", dir, |port, _| {
        let mut command = Command::new(&python);
        command
            .arg(crate::common::repo().join("scripts/gcs_server.py"))
            .arg(port.to_string())
            .arg(root);
        command
    })
}

/// nginx serving `root` over HTTP: with WebDAV PROPFIND listing when `dav`, else a
/// server that answers GET/HEAD (ranges included) but cannot list.
pub fn nginx(root: &Path, dav: bool) -> Server {
    let module = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so";
    assert!(
        !dav || Path::new(module).is_file(),
        "{module} is missing: apt-get install libnginx-mod-http-dav-ext (scripts/test.sh does)"
    );
    let load = if dav {
        format!("load_module {module};")
    } else {
        String::new()
    };
    let listing = if dav {
        "dav_ext_methods PROPFIND OPTIONS;"
    } else {
        "limit_except GET HEAD { deny all; }"
    };
    let nginx = Path::new("/usr/sbin/nginx");
    assert!(
        nginx.is_file(),
        "nginx is missing: apt-get install nginx-light (scripts/test.sh does)"
    );
    spawn("nginx", TempDir::new("nginx"), |port, dir| {
        let d = dir.display();
        let conf = format!(
            "{load}\nuser root;\ndaemon off;\nmaster_process off;\nworker_processes 1;\n\
             pid {d}/nginx.pid;\nerror_log {d}/server.log info;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log {d}/access.log;\n client_body_temp_path {d}/body;\n \
             proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n \
             scgi_temp_path {d}/scgi;\n keepalive_requests 100000;\n \
             server {{\n  listen 127.0.0.1:{port};\n  root {};\n  location / {{ {listing} }}\n }}\n}}\n",
            root.display()
        );
        std::fs::write(dir.join("nginx.conf"), conf).expect("nginx.conf");
        let mut command = Command::new(nginx);
        command
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("server.log"));
        command
    })
}

/// How long the fault proxy may take to reply to a control command.
const PROXY_REPLY_GUARD: Duration = Duration::from_secs(60);

/// The fault-injecting proxy in front of `upstream`, and its control connection.
pub struct Proxy {
    pub server: Server,
    control: std::sync::Mutex<(BufReader<TcpStream>, TcpStream)>,
}

impl Proxy {
    pub fn start(upstream: u16, python: &str) -> Proxy {
        let dir = TempDir::new("proxy");
        let script = crate::common::repo().join("scripts/fault_proxy.py");
        let log = dir.path().join("server.log");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("proxy log"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", script.display()));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("proxy stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let ports: Vec<u16> = line
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        let [port, control] = ports[..] else {
            let _ = child.kill();
            panic!(
                "fault proxy did not report its ports ({line:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let stream = TcpStream::connect(("127.0.0.1", control)).expect("proxy control");
        // A hung proxy fails the test (see `command`) instead of hanging it; the clone
        // below is the same socket, with the same timeout.
        stream
            .set_read_timeout(Some(PROXY_REPLY_GUARD))
            .expect("proxy control timeout");
        let reader = BufReader::new(stream.try_clone().expect("clone control"));
        Proxy {
            server: Server {
                _env: None,
                child,
                port,
                name: "fault proxy".into(),
                dir: Some(dir),
            },
            control: std::sync::Mutex::new((reader, stream)),
        }
    }

    /// Send one control command; its reply. A proxy that does not reply within a minute
    /// fails the test, with its log.
    pub fn command(&self, command: &str) -> String {
        let mut guard = self.control.lock().expect("control lock");
        let (reader, writer) = &mut *guard;
        if let Err(e) = writeln!(writer, "{command}") {
            panic!(
                "proxy: {command}: control write: {e}; its log:\n{}",
                super::tail(&self.server.log(), 4000)
            );
        }
        let mut reply = String::new();
        if let Err(e) = reader.read_line(&mut reply) {
            panic!(
                "proxy: {command}: no reply within {PROXY_REPLY_GUARD:?} ({e}); its log:\n{}",
                super::tail(&self.server.log(), 4000)
            );
        }
        assert!(
            reply.starts_with("ok"),
            "proxy: {command}: {reply:?}; its log:\n{}",
            super::tail(&self.server.log(), 4000)
        );
        reply.trim().to_string()
    }

    /// Requests seen by method since the last reset.
    pub fn requests(&self, method: &str) -> u64 {
        let reply = self.command("stats");
        reply
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .find(|(m, _)| *m == method)
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0)
    }

    pub fn url(&self) -> String {
        self.server.url()
    }
}
