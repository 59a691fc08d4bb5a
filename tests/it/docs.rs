//! The documentation: README.md stays short (at most 150 lines) and links every page of
//! `docs/`; every relative link of README.md and `docs/*.md` leads to a file that exists
//! and, with `#anchor`, to one of its headings (GitHub's anchors); and every runnable
//! example (a fenced block whose info string is `sh runnable`) passes when
//! `scripts/doc_examples.py` runs it with the binary under test against a copy of a
//! fixture store. Mounts for real (root, /dev/fuse).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_no_failures, fixtures_dir, venv_python, zarrfs};

/// The README's length at most, in lines.
const README_MAX_LINES: usize = 150;
/// The runnable examples the pages hold at least.
const MIN_EXAMPLES: usize = 15;

fn repo() -> PathBuf {
    crate::common::repo()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and the Markdown pages of docs/, in name order.
fn pages() -> Vec<PathBuf> {
    let docs = repo().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages.insert(0, repo().join("README.md"));
    pages
}

/// The fence a line opens or closes (its character and length), if it is one.
fn fence(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = trimmed.chars().take_while(|x| *x == c).count();
    (run >= 3).then_some((c, run))
}

/// The lines of `text` outside fenced code blocks (a fenced line becomes empty, so a
/// heading's `#` in a shell comment is not taken for a heading).
fn prose_lines(text: &str) -> Vec<&str> {
    let mut open: Option<(char, usize)> = None;
    text.lines()
        .map(|line| match (open, fence(line)) {
            (None, Some(f)) => {
                open = Some(f);
                ""
            }
            (Some((c, n)), Some((c2, n2))) if c == c2 && n2 >= n => {
                let rest = line.trim_start().trim_start_matches(c);
                if rest.trim().is_empty() {
                    open = None;
                }
                ""
            }
            (Some(_), _) => "",
            (None, None) => line,
        })
        .collect()
}

/// `text` without its inline code spans (a run of backticks up to the next run of the
/// same length, across line ends too); an unmatched run stays as it is.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|c| **c == '`').count();
                if other == run {
                    close = Some(j + other);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in the prose of a Markdown page.
fn link_targets(text: &str) -> Vec<String> {
    let prose = without_code_spans(&prose_lines(text).join("\n"));
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = None;
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(k);
                    break;
                }
                ')' => depth -= 1,
                '\n' => break,
                _ => {}
            }
        }
        match end {
            Some(end) => {
                let target = after[..end].trim();
                let target = target.split_whitespace().next().unwrap_or("");
                targets.push(
                    target
                        .trim_start_matches('<')
                        .trim_end_matches('>')
                        .to_string(),
                );
                rest = &after[end..];
            }
            None => rest = after,
        }
    }
    targets
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation other than `-`
/// and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (ATX headings outside code blocks); a repeated
/// heading's anchor takes `-1`, `-2`, ... as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose_lines(text) {
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&level) || line.len() - trimmed.len() > 3 {
            continue;
        }
        let title = &trimmed[level..];
        if !title.is_empty() && !title.starts_with(' ') {
            continue;
        }
        let title = title.trim().trim_end_matches('#').trim();
        let base = anchor(title);
        let mut name = base.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        seen.insert(name);
    }
    seen
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn the_readme_is_short_and_links_every_page_of_docs() {
    let readme = read(&repo().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
    let linked: BTreeSet<String> = link_targets(&readme)
        .into_iter()
        .map(|t| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let mut failures = Vec::new();
    for page in pages().iter().skip(1) {
        let name = page.file_name().expect("name").to_string_lossy();
        let want = format!("docs/{name}");
        if !linked.contains(&want) {
            failures.push(format!("README.md does not link {want}"));
        }
    }
    assert_no_failures(&failures);
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading_that_exist() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let shown = page
            .strip_prefix(repo())
            .unwrap_or(&page)
            .display()
            .to_string();
        for target in link_targets(&text) {
            if target.is_empty() {
                failures.push(format!("{shown}: an empty link"));
                continue;
            }
            if is_external(&target) {
                continue;
            }
            checked += 1;
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a page's folder").join(file)
            };
            if !dest.exists() {
                failures.push(format!("{shown}: {target}: no file {}", dest.display()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if dest.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&dest)).contains(fragment)
            {
                failures.push(format!(
                    "{shown}: {target}: no heading with anchor #{fragment} in {}",
                    dest.display()
                ));
            }
        }
    }
    assert_no_failures(&failures);
    assert!(checked > 0, "no relative link found in README.md or docs/");
}

#[test]
fn anchors_follow_githubs_rule() {
    assert_eq!(
        anchor("mount(8), fstab and systemd"),
        "mount8-fstab-and-systemd"
    );
    assert_eq!(anchor("Bad or hostile stores"), "bad-or-hostile-stores");
    assert_eq!(anchor("EIO: a chunk_key fails"), "eio-a-chunk_key-fails");
    let page = "# A\n\n```sh\n# not a heading\n```\n## `--io` modes\n## A\n";
    let found = anchors(page);
    let want: BTreeSet<String> = ["a", "--io-modes", "a-1"].map(String::from).into();
    assert_eq!(found, want);
    let links = link_targets("[a](docs/x.md#y) `[b](no)` and [c](#z)\n```\n[d](no)\n```\n");
    assert_eq!(links, ["docs/x.md#y", "#z"]);
}

#[test]
fn every_runnable_example_passes() {
    let script = repo().join("scripts/doc_examples.py");
    let python = venv_python("ZARRFS_TEST_PYTHON", "venv-zarr3");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--zarrfs")
        .arg(zarrfs())
        .arg("--fixtures")
        .arg(fixtures_dir())
        .arg("--python")
        .arg(&python)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scripts/doc_examples.py: {}\n{stdout}\n{stderr}",
        out.status
    );
    let summary = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("doc_examples: "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    let run: usize = summary
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {summary:?}"));
    assert!(
        run >= MIN_EXAMPLES,
        "only {run} runnable examples (at least {MIN_EXAMPLES} wanted):\n{stdout}"
    );
}
