//! The layers of `src/` (see `src/lib.rs` and DESIGN.md): every top-level module names
//! (`crate::MODULE`, in `use` lines and paths, tests included) only the modules below it,
//! so there is no import circle between them.

use std::path::Path;

/// Top to bottom; `error`, `json`, `limits` and `pool` lie beneath them all. The two
/// fronts (`daemon`, FUSE; `serve`, HTTP) sit over `process` and `fs`; the HTTP front
/// names nothing of the FUSE one.
const LAYERS: [&str; 12] = [
    "cli",
    "daemon",
    "serve",
    "process",
    "fs",
    "write",
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
    let src = crate::common::repo().join("src");
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

/// The kinds of `store/`, top to bottom: each names only those after it. The trait, its
/// types, locations, versions, options and errors (`mod.rs` and the files beside it that
/// are not a kind) lie beneath them all.
const STORE_KINDS: [&str; 5] = ["open", "namespace", "connect", "adapter", "source"];

/// The rank of a store submodule: its index in STORE_KINDS, anything else beneath them.
fn store_rank(module: &str) -> usize {
    STORE_KINDS
        .iter()
        .position(|m| *m == module)
        .unwrap_or(STORE_KINDS.len())
}

/// The items `src/store/mod.rs` re-exports, with the kind each comes from
/// (`pub use adapter::spans::{budget_for, Spans};` gives budget_for and Spans, adapter).
fn store_reexports(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let kind = ident(rest);
        let items = match rest.find('{') {
            Some(open) => rest[open + 1..].trim_end_matches('}').to_string(),
            None => rest.rsplit("::").next().unwrap_or("").to_string(),
        };
        for item in items.split(',') {
            let name = ident(item.rsplit("::").next().unwrap_or(""));
            if !name.is_empty() {
                out.push((name, kind.clone()));
            }
        }
    }
    out
}

/// The first names after `crate::store::` in a source text (each item of a `{...}`
/// group, nested groups skipped).
fn store_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::store::") {
        rest = &rest[at + "crate::store::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut start = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && !c.is_whitespace() => {
                            out.push(ident(&group[i..]));
                            start = false;
                        }
                        _ => {}
                    }
                }
            }
            None => out.push(ident(rest)),
        }
    }
    out
}

/// The names reached through `super::` chains that climb to `store` itself, in the file
/// of module `module` (`["store", "namespace", "targets"]`).
fn super_refs(text: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        let before = &rest[..at];
        rest = &rest[at..];
        // Only a path's start: not `super::` inside `super::super::`.
        if before.ends_with("::") {
            rest = &rest["super::".len()..];
            continue;
        }
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = r;
        }
        if module.len().checked_sub(climbs) == Some(1) {
            let name = ident(rest);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn store_kinds_name_only_the_kinds_below_them() {
    let store = crate::common::repo().join("src/store");
    let mod_rs = std::fs::read_to_string(store.join("mod.rs")).expect("read store/mod.rs");
    let reexports = store_reexports(&mod_rs);
    let kind_of = |name: &str| -> String {
        reexports
            .iter()
            .find(|(item, _)| item == name)
            .map_or(name.to_string(), |(_, kind)| kind.clone())
    };
    let mut files = Vec::new();
    rust_files(&store, &mut files);
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        let rel = file.strip_prefix(&store).expect("under store");
        let mut module: Vec<String> = vec!["store".into()];
        module.extend(
            rel.components()
                .filter_map(|c| c.as_os_str().to_str())
                .map(|c| c.trim_end_matches(".rs").to_string()),
        );
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        let own = module.get(1).map_or(STORE_KINDS.len(), |m| store_rank(m));
        let text = std::fs::read_to_string(file).expect("read source");
        let mut names = store_refs(&text);
        names.extend(super_refs(&text, &module));
        for name in names {
            let kind = kind_of(&name);
            let rank = store_rank(&kind);
            checked += 1;
            let same = module.get(1) == Some(&kind);
            if !same && rank <= own && rank < STORE_KINDS.len() {
                failures.push(format!(
                    "store/{}: names store::{name} ({kind})",
                    rel.display()
                ));
            }
        }
    }
    assert!(checked > 50, "only {checked} references found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
