//! The layering rule of ARCHITECTURE.md, checked: counting each top-level module or folder
//! of `server/src` as one, none imports one that imports it back, directly or through
//! others. Imports are read from the source text (`crate::name` paths, doc links included,
//! outside plain comments and each file's test module), so a new cycle fails here, naming
//! its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module's imports of the others.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).expect("read server/src").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let top = |p: &Path| -> String {
        let rel = p.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a component");
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = top(f);
        if module == "lib" || module == "main" {
            continue;
        }
        // Tests may reach anywhere: a test file, or a file's own test module.
        if f.file_name()
            .is_some_and(|n| n == "tests.rs" || n == "parity.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read a source file");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let deps = out.entry(module.clone()).or_default();
        // Doc comments count: a doc link is a reference too.
        let plain_comment = |l: &str| {
            let l = l.trim_start();
            l.starts_with("//") && !l.starts_with("///") && !l.starts_with("//!")
        };
        for line in code.lines().filter(|l| !plain_comment(l)) {
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                    group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap_or(""))
                        .collect()
                } else {
                    vec![rest
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or("")]
                };
                for n in names.into_iter().filter(|n| !n.is_empty() && *n != module) {
                    deps.insert(n.to_string());
                }
            }
        }
    }
    let known: BTreeSet<String> = out.keys().cloned().collect();
    for deps in out.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    out
}

/// Every module `from` reaches through any chain of imports.
fn reach<'a>(g: &'a BTreeMap<String, BTreeSet<String>>, from: &'a str) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = g[from].iter().map(String::as_str).collect();
    while let Some(d) = todo.pop() {
        if seen.insert(d) {
            todo.extend(g[d].iter().map(String::as_str));
        }
    }
    seen
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = imports(&src);
    // The reading works: the modules are found, and imports with them.
    assert!(g.len() > 15, "modules found: {:?}", g.keys());
    assert!(g["web"].contains("live"), "web's imports: {:?}", g["web"]);
    for (m, direct) in &g {
        let back: Vec<&String> = direct
            .iter()
            .filter(|d| reach(&g, d).contains(m.as_str()))
            .collect();
        assert!(
            back.is_empty(),
            "`{m}` imports {back:?}, which import `{m}` back (ARCHITECTURE.md, Layers)"
        );
    }
}
