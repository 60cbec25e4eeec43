//! The book (`docs/`) and the README against what they describe: every
//! relative link reaches a page and, when it names one, a heading; and every
//! `ringstore …` command shown in a code block is one the CLI accepts.
//!
//! Links: a link in `docs/src/**/*.md` or `README.md` that is not a web
//! address must name an existing file, relative to the page, and its
//! `#anchor` must be the id of a heading of that page, as mdBook makes
//! them (lower case; letters, digits, `_` and `-` kept, spaces made `-`,
//! the rest dropped).
//!
//! Commands: each line of a fenced code block (not `toml`, `rust` or
//! `python`; in a `text` block, only after a `$ ` prompt) that runs
//! `ringstore` (after a `$ ` prompt, environment assignments, or
//! `cargo run --release --`), with `\` continuations
//! joined and `#` comments dropped, is walked as clap would: words that
//! name a subcommand of the command so far extend its path, and each
//! option (`--name`, `--name=value`, `-x`) must appear in the help of that
//! path (`ringstore <path> --help`, which must succeed); an option the help
//! shows with a `<VALUE>` takes the next word. Positional words are not
//! checked: the book writes them as placeholders (`KEYSPACE`, `HOST_ID`).
//!
//! `docs/check.sh` runs this file; so does the suite (`./test.sh`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `README.md` and every page of the book, as (path, text).
fn pages() -> Vec<(PathBuf, String)> {
    let mut files = vec![Path::new(ROOT).join("README.md")];
    let mut dirs = vec![Path::new(ROOT).join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// The targets of the Markdown links `[text](target)` on `line`, leaving
/// out inline code spans.
fn link_targets(line: &str) -> Vec<String> {
    let mut outside_code = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            outside_code.push_str(part);
        }
    }
    let mut targets = Vec::new();
    let mut rest = outside_code.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        targets.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    targets
}

/// The id mdBook gives a heading with this text.
fn heading_id(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of the headings of a page.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| line[hashes..].trim())
                .filter(|heading| !heading.is_empty())
                .map(heading_id)
        })
        .collect()
}

#[test]
fn every_relative_link_of_the_book_and_readme_reaches_a_page_and_heading() {
    let pages = pages();
    let by_path: BTreeMap<PathBuf, &str> = pages
        .iter()
        .map(|(path, text)| (path.canonicalize().unwrap(), text.as_str()))
        .collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (path, text) in &pages {
        for (number, line) in prose(text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let where_ = format!("{}:{number}: ({target})", path.display());
                let resolved = if file.is_empty() {
                    path.clone()
                } else {
                    path.parent().unwrap().join(file)
                };
                let Ok(resolved) = resolved.canonicalize() else {
                    broken.push(format!("{where_}: no such file"));
                    continue;
                };
                let Some(anchor) = anchor else { continue };
                match by_path.get(&resolved) {
                    Some(text) if anchors(text).contains(anchor) => {}
                    Some(text) => broken.push(format!(
                        "{where_}: no heading #{anchor} there (its headings: {:?})",
                        anchors(text)
                    )),
                    None => broken.push(format!("{where_}: an anchor into a page not checked")),
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The `ringstore` command lines of the code blocks of `text`, with their
/// line numbers, as words after `ringstore`.
fn documented_commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut commands = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(language) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(language.trim().to_string()),
            };
            continue;
        }
        let Some(language) = &fence else { continue };
        if ["toml", "rust", "rust,ignore", "python"].contains(&language.as_str()) {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(part) => {
                joined.push_str(part);
                joined.push(' ');
                pending = Some((start, joined));
                continue;
            }
            None => joined.push_str(line),
        }
        // A `text` block shows output (a diagram, a table): only its
        // lines after a `$ ` prompt are commands.
        if language == "text" && !joined.trim_start().starts_with("$ ") {
            continue;
        }
        if let Some(words) = ringstore_words(&joined) {
            commands.push((start, words));
        }
    }
    commands
}

/// The words after `ringstore` if `line` runs it.
fn ringstore_words(line: &str) -> Option<Vec<String>> {
    let line = line.trim_start();
    let line = line.strip_prefix("$ ").unwrap_or(line);
    // Comments: `#` at the start of a word, outside quotes (enough here).
    let without_comment = match line.find(" #") {
        Some(at) => &line[..at],
        None if line.starts_with('#') => "",
        None => line,
    };
    let words = shlex::split(without_comment)?;
    let mut words = words.into_iter().skip_while(|w| {
        w.contains('=') && !w.starts_with('-') && w.chars().next().is_some_and(char::is_uppercase)
    });
    let first = words.next()?;
    let rest: Vec<String> = words.collect();
    match first.as_str() {
        "ringstore" | "target/release/ringstore" | "target/debug/ringstore" => Some(rest),
        "cargo" if rest.starts_with(&["run".into(), "--release".into(), "--".into()]) => {
            Some(rest[3..].to_vec())
        }
        _ => None,
    }
}

/// What `ringstore <path> --help` says: its subcommands, and its options
/// with whether each takes a value.
struct Help {
    subcommands: BTreeSet<String>,
    /// Whether it takes positional arguments (an `Arguments:` section).
    arguments: bool,
    /// `--long` and `-s` names, each with whether it takes a value.
    options: BTreeMap<String, bool>,
}

fn help(path: &[String]) -> Result<Help, String> {
    let output = Command::new(BIN)
        .args(path)
        .arg("--help")
        .env_remove("RINGSTORE_HOST")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "`ringstore {} --help` failed: {}",
            path.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut section = "";
    let mut help = Help {
        subcommands: BTreeSet::new(),
        arguments: text.contains("\nArguments:\n"),
        options: BTreeMap::new(),
    };
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let entry = line.trim_start();
        // An entry starts two spaces in; a wrapped description further.
        if line.len() - entry.len() > 6 && !entry.starts_with('-') {
            continue;
        }
        if section == "Commands:" {
            if let Some(name) = entry.split_whitespace().next() {
                help.subcommands.insert(name.to_string());
            }
        } else if entry.starts_with('-') {
            // `-n, --operations <N>  …` or `--host <HOST:PORT>  …` or `-T, --tokens`.
            let head = entry.split("  ").next().unwrap_or(entry);
            let takes_value = head.contains('<');
            for name in head.split([',', ' ']).filter(|w| w.starts_with('-')) {
                help.options.insert(name.to_string(), takes_value);
            }
        }
    }
    Ok(help)
}

/// Walks `words` as clap would; the problems found.
fn check_command(words: &[String], helps: &mut BTreeMap<Vec<String>, Help>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut i = 0;
    let mut positional_seen = false;
    while i < words.len() {
        if !helps.contains_key(&path) {
            match help(&path) {
                Ok(found) => {
                    helps.insert(path.clone(), found);
                }
                Err(error) => {
                    problems.push(error);
                    return problems;
                }
            }
        }
        let current = &helps[&path];
        let word = &words[i];
        i += 1;
        if word.starts_with('-') && word.len() > 1 && word != "-" {
            let (name, inline_value) = match word.split_once('=') {
                Some((name, _)) => (name, true),
                None => (word.as_str(), false),
            };
            match current.options.get(name) {
                Some(true) if !inline_value => i += 1,
                Some(_) => {}
                None => problems.push(format!(
                    "`ringstore {}` has no option {name}",
                    path.join(" ")
                )),
            }
        } else if !positional_seen && current.subcommands.contains(word) {
            path.push(word.clone());
        } else if !current.arguments {
            problems.push(format!(
                "`ringstore {}` has no subcommand or argument {word:?}",
                path.join(" ")
            ));
            return problems;
        } else {
            positional_seen = true;
        }
    }
    if !helps.contains_key(&path)
        && let Err(error) = help(&path).map(|found| helps.insert(path.clone(), found))
    {
        problems.push(error);
    }
    problems
}

#[test]
fn every_documented_ringstore_command_is_one_the_cli_accepts() {
    let mut helps = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (path, text) in pages() {
        for (number, words) in documented_commands(&text) {
            checked += 1;
            for problem in check_command(&words, &mut helps) {
                problems.push(format!(
                    "{}:{number}: ringstore {}: {problem}",
                    path.display(),
                    words.join(" ")
                ));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} commands found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "documented commands the CLI does not accept:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_command_check_catches_an_unknown_subcommand_and_an_unknown_option() {
    let mut helps = BTreeMap::new();
    let words = |line: &str| ringstore_words(line).unwrap();
    assert!(check_command(&words("ringstore repair status"), &mut helps).is_empty());
    assert!(
        check_command(
            &words("ringstore stress write -n 10 --keyspace demo --consistency QUORUM"),
            &mut helps
        )
        .is_empty()
    );
    let unknown_option = check_command(&words("ringstore status --no-such-flag"), &mut helps);
    assert_eq!(unknown_option.len(), 1, "{unknown_option:?}");
    let unknown = check_command(&words("ringstore frobnicate demo"), &mut helps);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    let unknown = check_command(&words("ringstore keyspace frobnicate demo"), &mut helps);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    let commented = ringstore_words("ringstore get demo hello   # world").unwrap();
    assert_eq!(commented, ["get", "demo", "hello"]);
    let with_env = ringstore_words("RINGSTORE_NEW_PASSWORD=... ringstore user create r").unwrap();
    assert_eq!(with_env, ["user", "create", "r"]);
}
