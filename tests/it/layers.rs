//! The layers of `src/` (see `src/lib.rs` and DESIGN.md): every top-level module names
//! (`crate::MODULE`, in `use` lines and paths, tests included) only the modules below it,
//! so there is no import circle between them; and no two files of `src/` (each file a
//! module) name each other, directly or through others.

use std::collections::{BTreeMap, BTreeSet};
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

/// The module path of a file of `src/` (`fs/io/read.rs` is `fs::io::read`, `fs/mod.rs`
/// is `fs`, `lib.rs` the crate); `None` for `main.rs`, the binary's own crate.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let rel = rel.strip_suffix(".rs")?;
    if rel == "main" {
        return None;
    }
    if rel == "lib" {
        return Some(Vec::new());
    }
    let mut module: Vec<String> = rel.split('/').map(str::to_string).collect();
    if module.last().is_some_and(|m| m == "mod") {
        module.pop();
    }
    Some(module)
}

/// Whether `c` may be part of an identifier.
fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br"…"`) that starts at `i` ends.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    if chars[i] != 'r' {
        return None;
    }
    let start = if i > 0 && chars[i - 1] == 'b' {
        i - 1
    } else {
        i
    };
    if start > 0 && ident_char(chars[start - 1]) {
        return None;
    }
    let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
    let open = i + 1 + hashes;
    if chars.get(open) != Some(&'"') {
        return None;
    }
    let mut j = open + 1;
    while j < chars.len() {
        let closing = chars.get(j + 1..j + 1 + hashes);
        if chars[j] == '"' && closing.is_some_and(|h| h.iter().all(|&c| c == '#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// Where a character literal that starts at `i` ends; `None` for a lifetime or label.
fn char_literal_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i + 1) == Some(&'\\') {
        let close = chars.get(i + 3..)?.iter().position(|&c| c == '\'')?;
        return Some(i + 3 + close + 1);
    }
    (chars.get(i + 2) == Some(&'\'')).then_some(i + 3)
}

/// A source text with its comments, strings and character literals blanked (line breaks
/// kept), so that only code is searched for paths.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let end = if c == '/' && next == Some('/') {
            Some(
                chars[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(chars.len(), |p| i + p),
            )
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            Some(j.min(chars.len()))
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            Some((j + 1).min(chars.len()))
        } else if c == '\'' {
            char_literal_end(&chars, i)
        } else {
            raw_string_end(&chars, i)
        };
        match end {
            Some(end) => {
                out.extend(
                    chars[i..end]
                        .iter()
                        .map(|&c| if c == '\n' { '\n' } else { ' ' }),
                );
                i = end;
            }
            None => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The identifier at byte `at` of `code` (empty if none), and where it ends.
fn word_at(code: &[u8], at: usize) -> (String, usize) {
    let at = at.min(code.len());
    let len = code[at..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    (
        String::from_utf8_lossy(&code[at..at + len]).into_owned(),
        at + len,
    )
}

fn skip_blanks(code: &[u8], mut at: usize) -> usize {
    while code.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// Whether the identifier at byte `at` of `code` is the start of a path: not preceded by
/// an identifier character or by `::` (the middle of a path).
fn starts_path(code: &[u8], at: usize) -> bool {
    let before = &code[..at];
    let last = before.iter().rposition(|b| !b.is_ascii_whitespace());
    let touching = before
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    !touching && !last.is_some_and(|l| l >= 1 && &before[l - 1..=l] == b"::")
}

/// The paths a use tree or expression names from byte `at` of `code`, just past its
/// first segment(s) `prefix`: one per item of a `{…}` group. Where it ends.
fn use_tree(code: &[u8], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segments = prefix;
    loop {
        let sep = skip_blanks(code, at);
        if !code[sep.min(code.len())..].starts_with(b"::") {
            out.push(segments);
            return at;
        }
        let next = skip_blanks(code, sep + 2);
        match code.get(next) {
            Some(b'{') => {
                let mut pos = next + 1;
                loop {
                    pos = skip_blanks(code, pos);
                    match code.get(pos) {
                        None => return pos,
                        Some(b'}') => return pos + 1,
                        Some(b',') => pos += 1,
                        _ => {
                            let (word, end) = word_at(code, pos);
                            if word.is_empty() {
                                // A glob (`*`) in a group: its folder is named already.
                                out.push(segments.clone());
                                pos += 1;
                                continue;
                            }
                            let mut item = segments.clone();
                            item.push(word);
                            pos = use_tree(code, end, item, out);
                            // Past a renaming (`as NAME`) to the next item.
                            while code.get(pos).is_some_and(|b| *b != b',' && *b != b'}') {
                                pos += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                let (word, end) = word_at(code, next);
                if word.is_empty() {
                    out.push(segments);
                    return next;
                }
                segments.push(word);
                at = end;
            }
        }
    }
}

/// The paths a code text names from `crate`, `super` or `self` (a `use` group giving
/// one path per item), each with the byte it starts at. Visibilities (`pub(in crate::x)`)
/// name no module.
fn rooted_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (word, end) = word_at(bytes, at);
        if word.is_empty() {
            at += 1;
            continue;
        }
        let rooted = matches!(word.as_str(), "crate" | "super" | "self");
        let visibility = code[..at]
            .trim_end()
            .strip_suffix("in")
            .is_some_and(|b| b.trim_end().ends_with('('));
        if rooted && starts_path(bytes, at) && !visibility {
            let mut paths = Vec::new();
            use_tree(bytes, end, vec![word], &mut paths);
            out.extend(paths.into_iter().filter(|p| p.len() > 1).map(|p| (at, p)));
        }
        at = end;
    }
    out
}

/// The inline modules of a code text (`mod tests { … }`): where each body starts and
/// ends, and its name; and the names of the modules it declares in files (`mod x;`).
fn mods_of(code: &str) -> (Vec<(usize, usize, String)>, Vec<String>) {
    let bytes = code.as_bytes();
    let (mut inline, mut files) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < bytes.len() {
        let (word, end) = word_at(bytes, at);
        if word.is_empty() {
            at += 1;
            continue;
        }
        at = end;
        if word != "mod" || !starts_path(bytes, end - 3) {
            continue;
        }
        let (name, after) = word_at(bytes, skip_blanks(bytes, end));
        let open = skip_blanks(bytes, after);
        match bytes.get(open) {
            Some(b';') if !name.is_empty() => files.push(name),
            Some(b'{') if !name.is_empty() => {
                let mut depth = 0usize;
                let close = (open..bytes.len())
                    .find(|&i| {
                        match bytes[i] {
                            b'{' => depth += 1,
                            b'}' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .unwrap_or(bytes.len());
                inline.push((open, close, name));
            }
            _ => {}
        }
    }
    (inline, files)
}

/// The module that `path` (`crate::…`, `super::…`, `self::…`), named inside module
/// `here`, resolves to: the deepest module a file defines that it walks through.
fn resolve(
    files: &BTreeMap<Vec<String>, usize>,
    here: &[String],
    path: &[String],
) -> Option<Vec<String>> {
    let (mut module, rest) = if path[0] == "crate" {
        (Vec::new(), &path[1..])
    } else {
        let mut module = here.to_vec();
        let climbs = path
            .iter()
            .take_while(|s| *s == "super" || *s == "self")
            .count();
        for segment in &path[..climbs] {
            if segment == "super" {
                module.pop()?;
            }
        }
        (module, &path[climbs..])
    };
    if !files.contains_key(&module) {
        // Inside an inline module: the file that holds it.
        while !files.contains_key(&module) {
            module.pop()?;
        }
        return Some(module);
    }
    for segment in rest {
        module.push(segment.clone());
        if !files.contains_key(&module) {
            module.pop();
            break;
        }
    }
    Some(module)
}

/// The names one file gives another: (from, to) -> the first path naming it.
type Names = BTreeMap<(usize, usize), String>;

/// What each file of `sources` (path under `src/`, text) names of the others, by its
/// `crate::`, `super::` and `self::` paths and, in a module, by the paths that start with
/// one of its own submodules (`use child::X`). A file naming a module that holds it (its
/// folder's `mod.rs`, `lib.rs`) is not counted: a module declares its submodules, and
/// they may use it.
fn names_between(sources: &[(String, String)]) -> (Vec<String>, Names) {
    let mut rels = Vec::new();
    let mut modules = Vec::new();
    let mut texts = Vec::new();
    for (rel, text) in sources {
        if let Some(module) = module_of(rel) {
            rels.push(rel.clone());
            modules.push(module);
            texts.push(code_of(text));
        }
    }
    let files: BTreeMap<Vec<String>, usize> = modules
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, m)| (m, i))
        .collect();
    let mut names = Names::new();
    for (from, code) in texts.iter().enumerate() {
        let own = &modules[from];
        let (inline, declared) = mods_of(code);
        let mut paths = rooted_paths(code);
        // `child::…` in a module: its own submodule.
        let bytes = code.as_bytes();
        for child in declared.iter().filter(|c| {
            let mut m = own.clone();
            m.push((*c).clone());
            files.contains_key(&m)
        }) {
            let mut at = 0;
            while let Some(found) = code[at..].find(child.as_str()) {
                let start = at + found;
                at = start + child.len();
                let whole = !bytes
                    .get(at)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                if whole && starts_path(bytes, start) {
                    let mut tree = Vec::new();
                    use_tree(bytes, at, vec!["self".into(), child.clone()], &mut tree);
                    paths.extend(tree.into_iter().filter(|p| p.len() > 2).map(|p| (start, p)));
                }
            }
        }
        for (at, path) in paths {
            let mut here = own.clone();
            for (open, close, name) in &inline {
                if *open < at && at < *close {
                    here.push(name.clone());
                }
            }
            let Some(target) = resolve(&files, &here, &path) else {
                continue;
            };
            let Some(&to) = files.get(&target) else {
                continue;
            };
            if to != from && !own.starts_with(&target) {
                names.entry((from, to)).or_insert_with(|| path.join("::"));
            }
        }
    }
    (rels, names)
}

/// The circles among files that `names` makes (Tarjan's strongly connected components
/// of more than one file), each said as one circle through its first file and the
/// names between its files.
fn circles(rels: &[String], names: &Names) -> Vec<String> {
    struct Search<'a> {
        next: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        count: usize,
        found: Vec<Vec<usize>>,
    }
    impl Search<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.count);
            self.low[v] = self.count;
            self.count += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.next.get(&v).into_iter().flatten() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort_unstable();
                    self.found.push(group);
                }
            }
        }
    }
    let mut next: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for &(from, to) in names.keys() {
        next.entry(from).or_default().insert(to);
    }
    let n = rels.len();
    let mut search = Search {
        next: &next,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        count: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if search.index[v].is_none() {
            search.visit(v);
        }
    }
    let mut out = Vec::new();
    for group in search.found {
        // One circle through the group's first file: the shortest way back to it.
        let start = group[0];
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut last = start;
        'search: while let Some(v) = queue.pop_front() {
            for &w in next.get(&v).into_iter().flatten() {
                if w == start {
                    last = v;
                    break 'search;
                }
                if group.contains(&w) && !came_from.contains_key(&w) {
                    came_from.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        let mut circle = vec![last];
        while let Some(&before) = circle.last().and_then(|v| came_from.get(v)) {
            circle.push(before);
        }
        circle.reverse();
        let mut lines = vec![format!(
            "circle: {} -> src/{}",
            circle
                .iter()
                .map(|&f| format!("src/{}", rels[f]))
                .collect::<Vec<_>>()
                .join(" -> "),
            rels[start]
        )];
        if group.len() > circle.len() {
            let files: Vec<String> = group.iter().map(|&f| format!("src/{}", rels[f])).collect();
            lines.push(format!("  (one of the circles among {})", files.join(", ")));
        }
        for (&(from, to), path) in names.range((group[0], 0)..) {
            if group.contains(&from) && group.contains(&to) {
                lines.push(format!(
                    "  src/{} names {path} (src/{})",
                    rels[from], rels[to]
                ));
            }
        }
        out.push(lines.join("\n"));
    }
    out
}

#[test]
fn no_files_of_src_name_each_other_in_a_circle() {
    let src = crate::common::repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let sources: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            let rel = file.strip_prefix(&src).expect("under src");
            let text = std::fs::read_to_string(file).expect("read source");
            (rel.to_string_lossy().into_owned(), text)
        })
        .collect();
    let (rels, names) = names_between(&sources);
    assert!(
        names.len() > 300,
        "only {} names between files found",
        names.len()
    );
    let found = circles(&rels, &names);
    assert!(
        found.is_empty(),
        "files that name each other:\n{}",
        found.join("\n")
    );
}

/// The circle check on a small made-up crate: circles direct or longer, through a
/// folder's `mod.rs` or a group, are found; a file naming its own folder's module, and
/// names in comments, strings and inline test modules' `super::*`, are not circles.
#[test]
fn the_circle_check_finds_circles_and_only_them() {
    let sources: Vec<(String, String)> = [
        ("lib.rs", "pub mod a;\npub mod b;\nmod c;"),
        ("main.rs", "fn main() { zarrfs::c::run() }"),
        ("a/mod.rs", "mod x;\nmod y;\npub use y::Y;\npub struct A;"),
        (
            "a/x.rs",
            "use super::A; // crate::c::C\nconst S: &str = \"crate::c\";\n\
             fn f() -> char { '\"' }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}",
        ),
        (
            "a/y.rs",
            "use crate::{b::{self, B}, c::C as Other};\npub struct Y;",
        ),
        ("b.rs", "pub struct B;\nfn g() { let _ = crate::a::A; }"),
        ("c.rs", "pub struct C;\npub(in crate::a) fn run() {}"),
    ]
    .into_iter()
    .map(|(rel, text)| (rel.to_string(), text.to_string()))
    .collect();
    let (rels, names) = names_between(&sources);
    let named = |from: &str, to: &str| {
        let index = |rel: &str| rels.iter().position(|r| r == rel).expect("a file");
        names.contains_key(&(index(from), index(to)))
    };
    assert!(
        named("a/mod.rs", "a/y.rs"),
        "a module's use of its own submodule"
    );
    assert!(
        named("a/y.rs", "b.rs") && named("a/y.rs", "c.rs"),
        "a group"
    );
    assert!(named("b.rs", "a/mod.rs"));
    assert!(!named("a/x.rs", "a/mod.rs"), "a file's own folder");
    assert!(!named("a/x.rs", "c.rs"), "a comment or a string");
    assert!(!named("c.rs", "a/mod.rs"), "a visibility");
    let found = circles(&rels, &names);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("circle: src/a/mod.rs -> src/a/y.rs -> src/b.rs -> src/a/mod.rs"),
        "{}",
        found[0]
    );
}
