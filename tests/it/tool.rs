//! zarrfs as an installed tool: `--version`, the man page, shell completions, the
//! progress bar of `cat` on a terminal (through script(1)), and a binary that needs no
//! library beyond libc.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{sha256, zarrfs, CliRun, TempDir};

fn run(args: &[&str]) -> CliRun {
    CliRun::run(Command::new(zarrfs()).args(args))
}

#[test]
fn version_names_the_package_version() {
    let out = run(&["--version"]);
    assert!(out.success(), "{out}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        format!("zarrfs {}", env!("CARGO_PKG_VERSION")),
        "{out}"
    );
}

/// The subcommands `zarrfs help` lists.
fn subcommands() -> Vec<String> {
    let out = run(&["help"]);
    assert!(out.success(), "{out}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let commands = text
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: in help: {text}"));
    commands
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

#[test]
fn the_man_page_names_every_subcommand_and_mount_flag() {
    let out = run(&["man"]);
    assert!(out.success(), "{out}");
    let page = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "not roff"
    );
    assert!(page.contains(".TH zarrfs 1"), "no title: {}", &page[..200]);
    let subs = subcommands();
    for must in [
        "mount",
        "umount",
        "cat",
        "inspect",
        "demo",
        "man",
        "completions",
    ] {
        assert!(
            subs.iter().any(|s| s == must),
            "help lacks {must}: {subs:?}"
        );
    }
    for sub in &subs {
        assert!(
            page.contains(&format!(".SH \"zarrfs {sub}\"")),
            "the man page has no section for {sub}"
        );
    }
    for flag in [
        "cache\\-size",
        "log\\-file",
        "log\\-level",
        "foreground",
        "fuse.zarrfs",
    ] {
        assert!(page.contains(flag), "the man page does not mention {flag}");
    }
    // man(1) renders it without complaint.
    let tmp = TempDir::new("man");
    let file = tmp.path().join("zarrfs.1");
    std::fs::write(&file, &page).expect("write man page");
    let rendered = Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .expect("run man (the man-db package)");
    assert!(rendered.status.success(), "man -l failed");
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(text.contains("zarrfs mount"), "rendered page: {text}");
    let warnings = String::from_utf8_lossy(&rendered.stderr);
    assert!(warnings.trim().is_empty(), "man -l warns: {warnings}");
}

#[test]
fn completions_for_three_shells_mention_the_flags() {
    let tmp = TempDir::new("completions");
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert!(out.success(), "{out}");
        let script = String::from_utf8_lossy(&out.stdout).to_string();
        for word in ["mount", "umount", "--cache-size", "--log-file", "--order"] {
            let bare = word.trim_start_matches('-');
            assert!(
                script.contains(word) || script.contains(&format!("-l {bare}")),
                "{shell} completion lacks {word}"
            );
        }
        if shell == "bash" {
            let file = tmp.path().join("zarrfs.bash");
            std::fs::write(&file, &script).expect("write");
            let check = Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
                .expect("run bash -n");
            assert!(
                check.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&check.stderr)
            );
            // Sourced, it registers a completion for zarrfs.
            let source = Command::new("bash")
                .arg("-c")
                .arg(format!("source {} && complete -p zarrfs", file.display()))
                .output()
                .expect("run bash");
            assert!(
                String::from_utf8_lossy(&source.stdout).contains("zarrfs"),
                "no completion registered: {}",
                String::from_utf8_lossy(&source.stderr)
            );
        }
    }
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.code(), Some(2), "{bad}");
}

#[test]
fn completions_into_a_closed_pipe_do_not_panic() {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} completions bash | head -c 10 >/dev/null",
            zarrfs().display()
        ))
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panic"), "{stderr}");
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
}

/// `zarrfs cat STORE temperature ARGS > OUT` on a pseudo-terminal made by script(1)
/// (util-linux): what appeared on the terminal.
fn cat_on_a_terminal(store: &Path, out: &Path, args: &str) -> String {
    let command = format!(
        "{} cat {} temperature {args} > {}",
        zarrfs().display(),
        store.display(),
        out.display()
    );
    let typescript = out.with_extension("typescript");
    let status = Command::new("script")
        .args(["-q", "-e", "-c", &command])
        .arg(&typescript)
        .env("COLUMNS", "120")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run script (util-linux)");
    assert!(status.success(), "{command}: {status}");
    String::from_utf8_lossy(&std::fs::read(&typescript).expect("typescript")).to_string()
}

#[test]
fn cat_shows_a_progress_bar_on_a_terminal_and_not_with_quiet() {
    let tmp = TempDir::new("progress");
    let store = tmp.path().join("demo.zarr");
    let made = run(&["demo", store.to_str().expect("utf-8 path")]);
    assert!(made.success(), "{made}");
    let want = common::cat(&store, "temperature", &[]);
    let size = want.len();

    let with_bar = tmp.path().join("with-bar.bin");
    let terminal = cat_on_a_terminal(&store, &with_bar, "");
    // The bar's last state: all bytes, as indicatif prints them (binary units).
    assert!(
        terminal.contains("MiB/1.48 MiB") || terminal.contains(&format!("{size}")),
        "no progress bar on the terminal: {terminal:?}"
    );
    assert!(terminal.contains('█'), "no bar drawn: {terminal:?}");
    let quiet = tmp.path().join("quiet.bin");
    let terminal_q = cat_on_a_terminal(&store, &quiet, "-q");
    assert!(
        !terminal_q.contains("MiB") && !terminal_q.contains('█'),
        "-q still shows a bar: {terminal_q:?}"
    );
    let want = sha256(&want);
    for file in [&with_bar, &quiet] {
        let got = std::fs::read(file).expect("output");
        assert_eq!(got.len(), size, "{}", file.display());
        assert_eq!(sha256(&got), want, "{}: bytes differ", file.display());
    }
    // Output to a pipe with stderr not a terminal: no bar, whatever -q says.
    let piped = run(&["cat", store.to_str().expect("utf-8"), "temperature"]);
    assert!(piped.success() && piped.stderr.is_empty(), "{piped}");
}

#[test]
fn the_binary_needs_no_library_beyond_libc() {
    let out = Command::new("ldd").arg(zarrfs()).output().expect("run ldd");
    assert!(out.status.success(), "ldd failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let allowed = [
        "linux-vdso",
        "libc.so",
        "libm.so",
        "libgcc_s.so",
        "ld-linux",
        "libpthread.so",
        "libdl.so",
        "librt.so",
    ];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            allowed.iter().any(|a| line.contains(a)),
            "the binary links a library beyond libc: {line}\n{text}"
        );
    }
    assert!(!text.contains("blosc"), "{text}");
}
