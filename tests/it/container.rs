//! The container image (`Containerfile`), built by `scripts/container.sh build-local` with
//! podman from a Debian base that mmdebstrap makes from Debian's packages and the binary
//! under test, then run both ways docs/clusters.md describes. Inside: with `/dev/fuse`
//! and CAP_SYS_ADMIN, zarrfs mounts the v3 fixture store in the container as the image's
//! non-root user (through the image's setuid fusermount3) and every fixed-size array
//! reads there as zarr-python read it back; `podman stop` unmounts and zarrfs ends with
//! success. On a descriptor: the test, as the privileged helper, mounts `/dev/fuse` at a
//! host folder for the image's user and hands the descriptor to a container that has no
//! `/dev/fuse` and no capability at all (`--preserve-fds 1`, `/dev/fd/3`); every array
//! reads on the host through it, and when the helper unmounts the container ends with
//! success. Needs root, /dev/fuse and podman (the script installs it where missing).

use crate::common;

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::fixtures::is_unsupported;
use common::helper::{detach, mount_device, unmount};
use common::mount::{array_file, wait_exit};
use common::user::open_to_all;
use common::{copy_dir, fixtures_dir, sha256, tail, zarrfs, Manifest, TempDir};

/// The tag the tests build and run.
const IMAGE: &str = "localhost/zarrfs:test";
/// The mountpoint the image's user owns.
const MOUNTPOINT: &str = "/mnt/zarr";
/// How long the image's build may take before it is taken for hung (a guard: a cold
/// build installs podman and fetches the Debian base).
const BUILD_GUARD: Duration = Duration::from_secs(20 * 60);
/// How long a mount may take to appear, or a container to end, before it is taken for hung.
const GUARD: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    crate::common::repo()
}

/// `bash scripts/container.sh ARGS` for podman, building `IMAGE` from the binary under test.
fn script(args: &[&str]) -> Command {
    let mut command = Command::new("bash");
    command
        .arg(repo().join("scripts/container.sh"))
        .args(args)
        .env("ZARRFS_ENGINE", "podman")
        .env("ZARRFS_IMAGE", IMAGE)
        .env("ZARRFS_BINARY", zarrfs())
        .current_dir(repo());
    command
}

/// The image, built once for this test process; a failed build fails every test.
fn image() -> &'static str {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let log_path = std::env::temp_dir().join(format!(
            "zarrfs-test-{}-container-build.log",
            std::process::id()
        ));
        let log = std::fs::File::create(&log_path).expect("build log");
        // In a process group of its own, so that a hung build ends whole (apt-get,
        // mmdebstrap, podman).
        let mut child = script(&["build-local"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("run bash scripts/container.sh");
        let status = wait_exit(&mut child, BUILD_GUARD);
        if status.is_none() {
            let group = i32::try_from(child.id()).expect("pid");
            // SAFETY: a signal to the process group the child leads.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
        }
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let _ = std::fs::remove_file(&log_path);
        match status {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(format!("{s}: {}", tail(&text, 6000))),
            None => Err(format!("hung, killed: {}", tail(&text, 6000))),
        }
    });
    if let Err(e) = built {
        panic!("scripts/container.sh build-local failed: {e}");
    }
    let out = podman("image", &["inspect", "--format", "{{.Id}}", IMAGE]);
    assert!(out.status.success(), "no image {IMAGE}: {}", text(&out));
    IMAGE
}

/// `podman SUBCOMMAND` with the options this machine needs (`scripts/container.sh argv`).
fn podman_command(sub: &str) -> Command {
    let out = script(&["argv", sub]).output().expect("run container.sh");
    assert!(out.status.success(), "container.sh argv: {}", text(&out));
    let argv: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(argv.first().map(String::as_str), Some("podman"), "{argv:?}");
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]).stdin(Stdio::null());
    command
}

/// `podman SUBCOMMAND ARGS`, run to its end.
fn podman(sub: &str, args: &[&str]) -> Output {
    podman_command(sub)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run podman {sub}: {e}"))
}

/// Exit status, stdout and stderr of `out`, for failure messages.
fn text(out: &Output) -> String {
    format!(
        "{}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A container name of this test process alone.
fn container_name(label: &str) -> String {
    format!("zarrfs-test-{}-{label}", std::process::id())
}

/// A container, removed (killed first if it runs) on drop.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman("rm", &["--force", "--time", "0", &self.0]);
    }
}

impl Container {
    /// `podman exec` of `args` in it, as the image's user.
    fn exec(&self, args: &[&str]) -> Output {
        let mut all = vec![self.0.as_str()];
        all.extend_from_slice(args);
        podman("exec", &all)
    }

    /// `podman exec` of `args`, which must succeed: its stdout.
    fn exec_ok(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(out.status.success(), "podman exec {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn logs(&self) -> String {
        text(&podman("logs", &[&self.0]))
    }

    fn running(&self) -> bool {
        let out = podman("inspect", &["--format", "{{.State.Running}}", &self.0]);
        String::from_utf8_lossy(&out.stdout).trim() == "true"
    }

    /// Line `name` of /proc/1/status in the container: its first process, zarrfs.
    fn status_line(&self, name: &str) -> String {
        self.exec_ok(&["cat", "/proc/1/status"])
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in /proc/1/status"))
    }
}

/// A copy of the v3 fixture store that every user can read, in `dir`.
fn readable_store(dir: &Path) -> PathBuf {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let store = dir.join("v3");
    copy_dir(&fixtures_dir().join("v3"), &store);
    open_to_all(&store);
    store
}

/// The fixed-size arrays of the v3 store zarrfs reads: (file under `mountpoint`, the
/// sha256 of zarr-python's C-order little-endian bytes).
fn fixed_size_arrays(m: &Manifest, mountpoint: &Path) -> Vec<(PathBuf, String)> {
    let arrays: Vec<(PathBuf, String)> = m
        .arrays()
        .iter()
        .filter(|a| a["store"] == "v3" && a["vlen"] != true && !is_unsupported(a))
        .map(|a| {
            let path = a["path"].as_str().expect("path");
            let hash = a["sha256"]["C_little"].as_str().expect("C_little sha256");
            (array_file(m, "v3", path, mountpoint), hash.to_string())
        })
        .collect();
    assert!(arrays.len() > 100, "only {} v3 arrays", arrays.len());
    arrays
}

/// The uid and gid the image runs as.
fn image_ids(image: &str) -> (u32, u32) {
    let args = ["--rm", "--network", "none", "--entrypoint", "sh", image];
    let out = podman("run", &[&args[..], &["-c", "id -u && id -g"]].concat());
    assert!(out.status.success(), "id in the image: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<u32> = stdout
        .lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|e| panic!("id: {e}: {stdout}"))
        })
        .collect();
    assert_eq!(ids.len(), 2, "id: {stdout}");
    (ids[0], ids[1])
}

#[test]
fn the_image_mounts_a_store_in_the_container_as_its_non_root_user() {
    let image = image();
    let tmp = TempDir::new("container-inside");
    let store = readable_store(tmp.path());
    let name = container_name("inside");
    let container = Container(name.clone());
    let volume = format!("{}:/data:ro", store.display());
    let out = podman(
        "run",
        &[
            "--detach",
            "--name",
            &name,
            "--network",
            "none",
            "--device",
            "/dev/fuse",
            "--cap-add",
            "SYS_ADMIN",
            "--volume",
            &volume,
            image,
            "/data",
            MOUNTPOINT,
        ],
    );
    assert!(out.status.success(), "podman run: {}", text(&out));

    // Mounted once the container's mount table has it.
    let began = Instant::now();
    loop {
        let mounts = container.exec(&["cat", "/proc/self/mounts"]);
        let line = format!(" {MOUNTPOINT} fuse");
        if String::from_utf8_lossy(&mounts.stdout).contains(&line) {
            break;
        }
        assert!(
            container.running(),
            "the container ended: {}",
            container.logs()
        );
        assert!(
            began.elapsed() < GUARD,
            "no mount at {MOUNTPOINT} within {GUARD:?}: {}",
            container.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // zarrfs, the container's first process, is the binary under test, run as the
    // image's user, not root.
    let version = Command::new(zarrfs())
        .arg("--version")
        .output()
        .expect("zarrfs --version");
    assert_eq!(
        container.exec_ok(&["zarrfs", "--version"]),
        String::from_utf8_lossy(&version.stdout),
        "the image holds another zarrfs"
    );
    let uid = container.exec_ok(&["id", "-u"]);
    assert_ne!(uid.trim(), "0", "the image's user is root");
    assert_eq!(
        container.status_line("Uid").split_whitespace().next(),
        Some(uid.trim()),
        "zarrfs does not run as the image's user"
    );

    // Every array, hashed in the container (`sha256sum -z`: NUL-ended lines, names as
    // they are).
    let m = Manifest::load();
    let arrays = fixed_size_arrays(&m, Path::new(MOUNTPOINT));
    let mut args = vec!["sha256sum", "-z"];
    let files: Vec<String> = arrays
        .iter()
        .map(|(f, _)| f.to_string_lossy().into_owned())
        .collect();
    args.extend(files.iter().map(String::as_str));
    let out = container.exec(&args);
    let hashes: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter_map(|line| line.split_once("  "))
        .map(|(hash, file)| (file.to_string(), hash.to_string()))
        .collect();
    let mut failures = Vec::new();
    for ((_, expected), file) in arrays.iter().zip(&files) {
        match hashes.get(file) {
            Some(hash) if hash == expected => {}
            Some(_) => failures.push(format!("{file}: other bytes than zarr-python's")),
            None => failures.push(format!("{file}: not read")),
        }
    }
    if !failures.is_empty() {
        failures.push(format!("sha256sum: {}", text(&out)));
    }
    common::assert_no_failures(&failures);

    // `podman stop` (SIGTERM) unmounts; zarrfs ends with success.
    let out = podman("stop", &["--time", "30", &name]);
    assert!(out.status.success(), "podman stop: {}", text(&out));
    let out = podman("wait", &[&name]);
    assert!(out.status.success(), "podman wait: {}", text(&out));
    let logs = container.logs();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "zarrfs's exit code: {logs}"
    );
    assert!(!logs.contains("ERROR"), "zarrfs's log: {logs}");
}

/// The container of the descriptor route, its `podman run` a child of the test, and the
/// helper's mount: on drop the container is removed, podman waited for, the mount
/// detached.
struct Served {
    container: Option<Container>,
    podman: Child,
    mountpoint: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.container.take());
        if wait_exit(&mut self.podman, GUARD).is_none() {
            let _ = self.podman.kill();
            let _ = self.podman.wait();
        }
        detach(&self.mountpoint);
    }
}

/// `command` started with descriptor `fd` as its descriptor 3, open across its exec (as
/// `--preserve-fds 1` wants it).
fn as_descriptor_3(command: &mut Command, fd: i32) {
    // SAFETY: only dup2 and fcntl, async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn a_container_without_capabilities_serves_a_helpers_mount_on_its_descriptor() {
    let image = image();
    let (uid, gid) = image_ids(image);
    assert_ne!(uid, 0, "the image's user is root");
    let tmp = TempDir::new("container-descriptor");
    let store = readable_store(tmp.path());
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let log_path = tmp.path().join("podman.log");
    let log = std::fs::File::create(&log_path).expect("log file");

    // The helper's part: open /dev/fuse and mount it, for the image's user.
    let device = mount_device(&mnt, uid, gid);
    let fd = device.as_raw_fd();

    // The container: no device, every capability dropped, the descriptor as its fd 3.
    let name = container_name("descriptor");
    let volume = format!("{}:/data:ro", store.display());
    let mut command = podman_command("run");
    command
        .args(["--name", &name, "--network", "none", "--cap-drop", "all"])
        .args(["--preserve-fds", "1", "--volume", &volume, image])
        .args(["/data", "/dev/fd/3"])
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
    as_descriptor_3(&mut command, fd);
    let child = command.spawn().expect("run podman");
    drop(device);
    let mut served = Served {
        container: Some(Container(name.clone())),
        podman: child,
        mountpoint: mnt.clone(),
    };
    let podman_log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // Served once the root folder lists.
    let began = Instant::now();
    while std::fs::read_dir(&mnt).is_err() {
        if let Ok(Some(status)) = served.podman.try_wait() {
            panic!("the container ended ({status}): {}", podman_log());
        }
        assert!(
            began.elapsed() < GUARD,
            "the mount was not served within {GUARD:?}: {}",
            podman_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // zarrfs in the container: the image's user, no capability, no /dev/fuse.
    let container = served.container.as_ref().expect("container");
    assert_eq!(
        container.status_line("Uid").split_whitespace().next(),
        Some(uid.to_string().as_str()),
        "zarrfs does not run as the image's user"
    );
    assert_eq!(
        container.status_line("CapEff"),
        "0000000000000000",
        "zarrfs has capabilities"
    );
    assert_eq!(
        container.status_line("CapBnd"),
        "0000000000000000",
        "the container's bounding set is not empty"
    );
    let out = container.exec(&["test", "-e", "/dev/fuse"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "/dev/fuse in the container: {}",
        text(&out)
    );

    // Every array, read on the host through the helper's mount.
    let m = Manifest::load();
    let mut failures = Vec::new();
    for (file, expected) in fixed_size_arrays(&m, &mnt) {
        match std::fs::read(&file) {
            Ok(bytes) if sha256(&bytes) == expected => {}
            Ok(_) => failures.push(format!(
                "{}: other bytes than zarr-python's",
                file.display()
            )),
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    common::assert_no_failures(&failures);

    // The helper unmounts: the connection ends, and so do zarrfs and its container, with
    // success.
    unmount(&mnt);
    let status = wait_exit(&mut served.podman, GUARD);
    let text = podman_log();
    assert!(
        status.is_some_and(|s| s.success()),
        "the container ended with {status:?}: {text}"
    );
    assert!(!text.contains("ERROR"), "zarrfs's log: {text}");
}
