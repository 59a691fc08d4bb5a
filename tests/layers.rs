//! The layers of `src/` (see `src/lib.rs` and DESIGN.md): every top-level module names
//! (`crate::MODULE`, in `use` lines and paths, tests included) only the modules below it,
//! so there is no import circle between them.

use std::path::Path;

/// Top to bottom; `error`, `json`, `limits` and `pool` lie beneath them all.
const LAYERS: [&str; 9] = [
    "cli",
    "daemon",
    "fs",
    "formats",
    "read",
    "hierarchy",
    "codec",
    "metadata",
    "store",
];
const BENEATH: [&str; 4] = ["error", "json", "limits", "pool"];

/// The rank of a top-level module: its index in LAYERS, the bottom ones last.
fn rank(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|m| *m == module)
        .or_else(|| BENEATH.contains(&module).then_some(LAYERS.len()))
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::NAME` references of a source text.
fn crate_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        // `crate::{a::b, c}`: each item of the group.
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            out.extend(group[..end].split(',').map(ident).filter(|n| !n.is_empty()));
        } else {
            out.push(ident(rest));
        }
    }
    out
}

/// The identifier `text` starts with (after blanks).
fn ident(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn modules_name_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        let Some(own) = rank(&top) else {
            continue; // lib.rs and main.rs sit above the layers
        };
        let text = std::fs::read_to_string(file).expect("read source");
        for name in crate_refs(&text) {
            // `crate::Error` / `crate::Result` are error.rs's re-exports.
            let module = match name.as_str() {
                "Error" | "Result" => "error",
                other => other,
            };
            checked += 1;
            match rank(module) {
                Some(r) if module == top || r > own || (r == own && own == LAYERS.len()) => {}
                Some(_) => failures.push(format!("{}: names crate::{name}", rel.display())),
                None => failures.push(format!("{}: crate::{name} is no layer", rel.display())),
            }
        }
    }
    assert!(checked > 100, "only {checked} references found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
