//! The house rules of issue 36, checked on the tree by reading its sources:
//!
//! - no module imports one that imports it back (a module is a source file;
//!   the arrows are `use crate::...`, `use super::...`, `use self::...` and
//!   `use child::...` declarations, grouped trees included, each resolved to
//!   the deepest module file that exists). A child that uses its parent's
//!   types while the parent uses the child's is a circle too: the issue's
//!   rule has no exception for parents, and a reader following the arrows
//!   cannot start at either end. The types both need belong in a module
//!   below both;
//! - no non-test source file in src/ or crates/*/src over 1,000 lines;
//! - no `#[path]` attribute in src/, crates/ or tests/;
//! - no non-test function over 120 lines (counted from the `fn` line to the
//!   closing brace). This is checked here and not by clippy's
//!   `too_many_lines`: that lint cannot leave tests out (no
//!   `allow-*-in-tests` option covers it), and it counts only non-blank,
//!   non-comment lines, which is not the measure the issue gives.
//!
//! Test code is left out: files named `*tests.rs`, files under a `tests/`
//! folder, files a parent declares under `#[cfg(test)]`, and inline
//! `#[cfg(test)] mod` blocks and `#[test]` functions.
//!
//! The sources are read by a small lexer that blanks comments, strings and
//! character literals (keeping line breaks, so line numbers stay true) and
//! then follows braces: enough for the tree's own code, not a Rust parser.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 120;

/// Generated tables and data, exempt from the file length rule. None
/// today.
const GENERATED: &[&str] = &[];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Recorded /sys trees under tests/data hold links that loop.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Comments, string and character literals replaced by spaces (line breaks
/// kept), so braces, `use` and `fn` are only the code's own.
fn blank(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
        } else if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && raw_start(&chars, i).is_some() {
            let (hashes, body) = raw_start(&chars, i).unwrap();
            for &ch in &chars[i..body] {
                out.push(keep(ch));
            }
            i = body;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push(keep(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_end(&chars, i).is_some() {
            let end = char_literal_end(&chars, i).unwrap();
            for _ in i..=end {
                out.push(' ');
            }
            i = end + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At `r"`, `r#"`, `br#"`: the number of `#` and where the body starts.
fn raw_start(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let mut i = at + if chars[at] == 'b' { 2 } else { 1 };
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (chars.get(i) == Some(&'"')).then_some((hashes, i + 1))
}

/// At a `'`: the index of the closing `'` of a character literal, or None
/// for a lifetime or label.
fn char_literal_end(chars: &[char], at: usize) -> Option<usize> {
    match chars.get(at + 1)? {
        '\\' => (at + 3..(at + 12).min(chars.len())).find(|&k| chars[k] == '\''),
        _ => (chars.get(at + 2) == Some(&'\'')).then_some(at + 2),
    }
}

/// A source file's module path (`["crate", "view", "tui"]`) within its
/// crate (the crate's source folder), or None for a binary's root.
fn module_path(crate_src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(crate_src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    let mut path = vec!["crate".to_string()];
    path.extend(parts);
    path
}

/// One `use` declaration's tree expanded into its paths.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let tokens: Vec<String> = tokenize(tree);
    let mut pos = 0;
    let mut out = Vec::new();
    expand_tree(&tokens, &mut pos, &mut Vec::new(), &mut out);
    out
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            if c == ':' && chars.get(i + 1) == Some(&':') {
                tokens.push("::".into());
                i += 1;
            } else if matches!(c, '{' | '}' | ',' | '*') {
                tokens.push(c.to_string());
            }
        }
        i += 1;
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

fn expand_tree(tokens: &[String], pos: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    loop {
        match tokens.get(*pos).map(String::as_str) {
            Some("{") => {
                *pos += 1;
                loop {
                    expand_tree(tokens, pos, prefix, out);
                    match tokens.get(*pos).map(String::as_str) {
                        Some(",") => *pos += 1,
                        Some("}") => {
                            *pos += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*pos).map(String::as_str) == Some("}") {
                        *pos += 1;
                        break;
                    }
                }
                prefix.truncate(depth);
                return;
            }
            Some("*") => {
                *pos += 1;
                out.push(prefix.clone());
                prefix.truncate(depth);
                return;
            }
            Some("::") => *pos += 1,
            Some(",") | Some("}") | None => {
                if prefix.len() > depth || depth > 0 {
                    out.push(prefix.clone());
                }
                prefix.truncate(depth);
                return;
            }
            Some("as") => *pos += 2,
            Some(word) => {
                prefix.push(word.to_string());
                *pos += 1;
            }
        }
    }
}

/// What one source file says, found by reading it.
#[derive(Default)]
struct Scan {
    /// `use` declarations outside test code: (line, module the declaration
    /// sits in, paths).
    uses: Vec<(usize, Vec<String>, Vec<Vec<String>>)>,
    /// Inline non-test modules (`mod name { ... }`) by path.
    inline_modules: Vec<Vec<String>>,
    /// Modules declared `#[cfg(test)] mod name;`: their files are test code.
    test_children: Vec<String>,
    /// Non-test functions: (name, first line, line count).
    functions: Vec<(String, usize, usize)>,
    /// Lines with a `#[path` attribute.
    path_attributes: Vec<usize>,
}

/// An open brace: what it opened.
enum Block {
    Module { test: bool },
    Function { name: String, line: usize, test: bool },
    Other { test: bool },
}

fn scan(source: &str, module: &[String]) -> Scan {
    let code: Vec<char> = blank(source).chars().collect();
    let mut result = Scan::default();
    let mut blocks: Vec<Block> = Vec::new();
    let mut modules: Vec<Vec<String>> = vec![module.to_vec()];
    let mut line = 1;
    // Attributes seen since the last item: whether a `#[cfg(test)]` or
    // `#[test]` applies to the next one.
    let mut pending_test = false;
    // A `fn` whose body brace is still to come.
    let mut pending_fn: Option<(String, usize)> = None;
    let mut pending_mod: Option<String> = None;
    let in_test = |blocks: &Vec<Block>| {
        blocks.iter().any(|b| match b {
            Block::Module { test } => *test,
            Block::Function { test, .. } => *test,
            Block::Other { test } => *test,
        })
    };
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c == '#' && code.get(i + 1) == Some(&'[') {
            let end = (i..code.len()).find(|&k| code[k] == ']').unwrap_or(code.len() - 1);
            let attribute: String = code[i..=end].iter().filter(|c| !c.is_whitespace()).collect();
            if attribute.starts_with("#[path") {
                result.path_attributes.push(line);
            }
            if attribute == "#[cfg(test)]" || attribute == "#[test]" || attribute.starts_with("#[cfg(all(test") {
                pending_test = true;
            }
            // The attribute's own paths (`value_parser = crate::cli::seconds`)
            // are arrows too: read on into it.
            i += 2;
            continue;
        }
        let starts_word = i == 0 || !(code[i - 1].is_alphanumeric() || code[i - 1] == '_');
        if starts_word && (c.is_alphabetic() || c == '_') {
            let end = (i..code.len())
                .find(|&k| !(code[k].is_alphanumeric() || code[k] == '_'))
                .unwrap_or(code.len());
            let word: String = code[i..end].iter().collect();
            let next_word = || {
                let start = (end..code.len())
                    .find(|&k| !code[k].is_whitespace())
                    .unwrap_or(code.len());
                let stop = (start..code.len())
                    .find(|&k| !(code[k].is_alphanumeric() || code[k] == '_'))
                    .unwrap_or(code.len());
                code[start..stop].iter().collect::<String>()
            };
            match word.as_str() {
                "use" => {
                    let stop = (end..code.len()).find(|&k| code[k] == ';').unwrap_or(code.len());
                    let tree: String = code[end..stop].iter().collect();
                    if !pending_test && !in_test(&blocks) {
                        result
                            .uses
                            .push((line, modules.last().unwrap().clone(), expand_use(&tree)));
                    }
                    line += tree.matches('\n').count();
                    pending_test = false;
                    i = stop + 1;
                    continue;
                }
                // `fn(u32) -> u32` is a type, not an item.
                "fn" if !next_word().is_empty() => pending_fn = Some((next_word(), line)),
                "mod" => pending_mod = Some(next_word()),
                _ => {
                    // A path in code (`crate::view::summary::render(..)`):
                    // an arrow as a `use` is.
                    let (path, stop) = inline_path(&code, i);
                    if path.len() > 1 {
                        if !pending_test && !in_test(&blocks) {
                            result.uses.push((line, modules.last().unwrap().clone(), vec![path]));
                        }
                        i = stop;
                        continue;
                    }
                }
            }
            i = end;
            continue;
        }
        match c {
            '{' => {
                let test = pending_test || in_test(&blocks);
                let block = if let Some(name) = pending_mod.take() {
                    let mut path = modules.last().unwrap().clone();
                    path.push(name);
                    if !test {
                        result.inline_modules.push(path.clone());
                    }
                    modules.push(path);
                    Block::Module { test }
                } else if let Some((name, line)) = pending_fn.take() {
                    Block::Function { name, line, test }
                } else {
                    Block::Other { test }
                };
                pending_test = false;
                blocks.push(block);
            }
            '}' => match blocks.pop() {
                Some(Block::Module { .. }) => {
                    modules.pop();
                }
                Some(Block::Function {
                    name,
                    line: first,
                    test: false,
                }) => result.functions.push((name, first, line - first + 1)),
                _ => {}
            },
            ';' => {
                // `fn f();` in a trait or extern block, `mod name;`.
                pending_fn = None;
                if let Some(name) = pending_mod.take() {
                    if pending_test {
                        result.test_children.push(name);
                    }
                }
                pending_test = false;
            }
            _ => {}
        }
        i += 1;
    }
    result
}

/// The path that starts at `at` (`a::b::c`, spaces allowed around `::`)
/// and where it ends.
fn inline_path(code: &[char], at: usize) -> (Vec<String>, usize) {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let skip_space = |mut k: usize| {
        while k < code.len() && code[k].is_whitespace() && code[k] != '\n' {
            k += 1;
        }
        k
    };
    let mut path = Vec::new();
    let mut i = at;
    let mut end = at;
    loop {
        let stop = (i..code.len()).find(|&k| !ident(code[k])).unwrap_or(code.len());
        if stop == i || !(code[i].is_alphabetic() || code[i] == '_') {
            break;
        }
        path.push(code[i..stop].iter().collect());
        end = stop;
        let k = skip_space(stop);
        if code.get(k) == Some(&':') && code.get(k + 1) == Some(&':') {
            i = skip_space(k + 2);
        } else {
            break;
        }
    }
    (path, end)
}

/// One crate's source files, read.
struct Crate {
    files: BTreeMap<Vec<String>, String>,
    scans: BTreeMap<String, Scan>,
    test_files: BTreeSet<String>,
}

fn read_crate(src: &Path) -> Crate {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let mut files = BTreeMap::new();
    let mut scans = BTreeMap::new();
    for path in &paths {
        let rel = relative(path);
        // A binary is a crate of its own: its `crate::` is not the library's.
        let binary = rel.ends_with("/main.rs") && path.parent() == Some(src) || rel.contains("/src/bin/");
        if binary {
            continue;
        }
        let module = module_path(src, path);
        let source = fs::read_to_string(path).unwrap();
        let scan = scan(&source, &module);
        for inline in &scan.inline_modules {
            files.insert(inline.clone(), rel.clone());
        }
        files.insert(module, rel.clone());
        scans.insert(rel, scan);
    }
    let mut test_files = BTreeSet::new();
    for (module, file) in &files {
        let name = file.rsplit('/').next().unwrap();
        let declared_test = module.len() > 1
            && files
                .get(&module[..module.len() - 1])
                .and_then(|parent| scans.get(parent))
                .is_some_and(|s| s.test_children.contains(module.last().unwrap()));
        if name.ends_with("tests.rs") || file.contains("/tests/") || declared_test {
            test_files.insert(file.clone());
        }
    }
    Crate {
        files,
        scans,
        test_files,
    }
}

/// The file a `use` path imports from, seen from `module`: the deepest
/// module of the path that has a file, or None for another crate.
fn resolve(krate: &Crate, module: &[String], path: &[String]) -> Option<String> {
    let first = path.first()?;
    let (mut at, rest): (Vec<String>, &[String]) = match first.as_str() {
        "crate" => (vec!["crate".to_string()], &path[1..]),
        "self" => (module.to_vec(), &path[1..]),
        "super" => {
            let mut at = module.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                at.pop();
                rest = &rest[1..];
            }
            (at, rest)
        }
        _ => {
            let mut child = module.to_vec();
            child.push(first.clone());
            if !krate.files.contains_key(&child) {
                return None; // another crate, or std
            }
            (module.to_vec(), path)
        }
    };
    let mut deepest = krate.files.get(&at).cloned();
    for segment in rest {
        at.push(segment.clone());
        match krate.files.get(&at) {
            Some(file) => deepest = Some(file.clone()),
            None => break,
        }
    }
    deepest
}

/// Every edge between files of a crate: (from, to) → the lines that make it.
fn edges(krate: &Crate) -> BTreeMap<(String, String), Vec<usize>> {
    let mut edges: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (file, scan) in &krate.scans {
        if krate.test_files.contains(file) {
            continue;
        }
        for (line, module, paths) in &scan.uses {
            for path in paths {
                if let Some(to) = resolve(krate, module, path) {
                    if &to != file && !krate.test_files.contains(&to) {
                        let lines = edges.entry((file.clone(), to)).or_default();
                        if !lines.contains(line) {
                            lines.push(*line);
                        }
                    }
                }
            }
        }
    }
    edges
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<(String, String), Vec<usize>>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(node: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &to in &next[node] {
            if !s.index.contains_key(to) {
                visit(to, next, s);
                let low = s.low[node].min(s.low[to]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(to) {
                let low = s.low[node].min(s.index[to]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            loop {
                let top = s.stack.pop().unwrap();
                s.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &node in next.keys() {
        if !state.index.contains_key(node) {
            visit(node, &next, &mut state);
        }
    }
    state.found
}

/// The library crate and every crate under crates/, each by its source
/// folder.
fn crates() -> Vec<Crate> {
    let mut sources = vec![root().join("src")];
    let mut members: Vec<PathBuf> = fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .collect();
    members.sort();
    sources.extend(members.into_iter().filter(|p| p.is_dir()));
    sources.iter().map(|s| read_crate(s)).collect()
}

/// Fails with every finding of `rule`, each naming the lines behind it.
fn report(rule: &str, findings: Vec<(Vec<String>, String)>) {
    assert!(
        findings.is_empty(),
        "{rule}:\n{}",
        findings.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut findings = Vec::new();
    for krate in crates() {
        let edges = edges(&krate);
        for circle in circles(&edges) {
            let members: BTreeSet<&String> = circle.iter().collect();
            let lines: Vec<String> = edges
                .iter()
                .filter(|((from, to), _)| members.contains(from) && members.contains(to))
                .map(|((from, to), lines)| {
                    let at: Vec<String> = lines.iter().map(|l| format!("{from}:{l}")).collect();
                    format!("    {from} -> {to} ({})", at.join(", "))
                })
                .collect();
            findings.push((
                circle.clone(),
                format!("circle of {}:\n{}", circle.join(", "), lines.join("\n")),
            ));
        }
    }
    report("modules importing each other", findings);
}

#[test]
fn no_non_test_source_file_is_over_1000_lines() {
    let mut findings = Vec::new();
    for krate in crates() {
        for file in krate.scans.keys() {
            if krate.test_files.contains(file) || GENERATED.contains(&file.as_str()) {
                continue;
            }
            let lines = fs::read_to_string(root().join(file)).unwrap().lines().count();
            if lines > MAX_FILE_LINES {
                findings.push((vec![file.clone()], format!("{file}: {lines} lines")));
            }
        }
    }
    report("files over 1,000 lines", findings);
}

#[test]
fn no_non_test_function_is_over_120_lines() {
    let mut findings = Vec::new();
    for krate in crates() {
        for (file, scan) in &krate.scans {
            if krate.test_files.contains(file) {
                continue;
            }
            for (name, line, lines) in &scan.functions {
                if *lines > MAX_FN_LINES {
                    findings.push((vec![file.clone()], format!("{file}:{line}: fn {name}, {lines} lines")));
                }
            }
        }
    }
    report("functions over 120 lines", findings);
}

#[test]
fn no_path_attribute() {
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut findings = Vec::new();
    for path in files {
        let file = relative(&path);
        let source = fs::read_to_string(&path).unwrap();
        for line in scan(&source, &["crate".to_string()]).path_attributes {
            findings.push((vec![file.clone()], format!("{file}:{line}: #[path]")));
        }
    }
    report("#[path] includes", findings);
}

/// The checks' own reading, on recorded sources: each would pass with a
/// reader that found nothing.
mod reader {
    use super::*;

    fn module(path: &str) -> Vec<String> {
        path.split("::").map(String::from).collect()
    }

    #[test]
    fn grouped_use_trees_expand_to_every_path() {
        let paths = expand_use(" crate::{a::b::{C, d as e}, f, g::*}, ");
        let want: Vec<Vec<String>> = vec![
            module("crate::a::b::C"),
            module("crate::a::b::d"),
            module("crate::f"),
            module("crate::g"),
        ];
        assert_eq!(paths, want);
        assert_eq!(expand_use(" super::super::x::Y"), vec![module("super::super::x::Y")]);
        assert_eq!(expand_use(" self::inner"), vec![module("self::inner")]);
    }

    #[test]
    fn comments_strings_and_tests_hide_nothing_else() {
        let source = r##"
use crate::a::X; // use crate::b;
/* use crate::c; */
const S: &str = "use crate::d; {";
const R: &str = r#"use crate::e; }"#;
fn f<'a>(x: &'a str) -> char { '{' }
#[cfg(test)]
mod tests {
    use crate::g;
    fn long() {}
}
mod inner {
    use super::h::Y;
}
fn g() {
    use crate::i;
}
"##;
        let scan = scan(source, &module("crate::m"));
        let uses: Vec<(usize, Vec<String>, Vec<Vec<String>>)> = scan.uses;
        assert_eq!(
            uses,
            vec![
                (2, module("crate::m"), vec![module("crate::a::X")]),
                (13, module("crate::m::inner"), vec![module("super::h::Y")]),
                (16, module("crate::m"), vec![module("crate::i")]),
            ]
        );
        let names: Vec<&str> = scan.functions.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!(scan.functions[1], ("g".to_string(), 15, 3));
        assert_eq!(scan.inline_modules, vec![module("crate::m::inner")]);
    }

    #[test]
    fn a_parent_and_child_importing_each_other_are_a_circle() {
        let mut files = BTreeMap::new();
        let mut scans = BTreeMap::new();
        for (path, file, source) in [
            ("crate", "src/lib.rs", "use crate::p::Q;"),
            ("crate::p", "src/p/mod.rs", "mod c;\nuse c::Thing;"),
            ("crate::p::c", "src/p/c.rs", "\n\nuse super::Q;"),
            ("crate::z", "src/z.rs", "use crate::p::c::Thing;"),
        ] {
            files.insert(module(path), file.to_string());
            scans.insert(file.to_string(), scan(source, &module(path)));
        }
        let krate = Crate {
            files,
            scans,
            test_files: BTreeSet::new(),
        };
        let edges = edges(&krate);
        assert_eq!(edges[&("src/p/c.rs".to_string(), "src/p/mod.rs".to_string())], vec![3]);
        assert_eq!(edges[&("src/p/mod.rs".to_string(), "src/p/c.rs".to_string())], vec![2]);
        assert_eq!(
            circles(&edges),
            vec![vec!["src/p/c.rs".to_string(), "src/p/mod.rs".to_string()]]
        );
    }
}
