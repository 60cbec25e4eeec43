//! The web console in a real browser, and its JSON API over plain HTTP, on
//! real `ringstore server` processes (address blocks 221 and 222).
//!
//! The browser is headless Chromium from the system's packages (`./test.sh`
//! installs it), run once per look through its command line: `--dump-dom`
//! gives the page's DOM after its script ran (the rows carry `data-state`,
//! the ring's arcs `class="arc"`), `--screenshot` a picture of it. The
//! screenshots go to `target/console-screenshots/`, named by step, and
//! their paths are printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, http_request, text};

/// How soon a killed node's row must show `DN` on the console.
const DN_WITHIN: Duration = Duration::from_secs(15);

// ---- the browser -----------------------------------------------------------

/// Headless Chromium, each run with a profile of its own.
struct Browser {
    binary: PathBuf,
    profiles: tempfile::TempDir,
}

impl Browser {
    /// The system's Chromium; a test fails (it is not skipped) without it.
    fn new() -> Browser {
        let binary = ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find_map(|name| which(name))
            .expect(
                "no headless Chromium: install it (Debian: apt-get install chromium), \
                 or run ./test.sh, which does",
            );
        Browser {
            binary,
            profiles: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, url: &str, what: &[&str]) -> std::process::Output {
        let profile = tempfile::tempdir_in(self.profiles.path()).unwrap();
        Command::new(&self.binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--window-size=1280,1000",
                // Virtual time runs the page's timers without waiting for
                // them, and stops while its fetches are in flight.
                "--virtual-time-budget=1500",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(what)
            .arg(url)
            .output()
            .expect("Chromium runs")
    }

    /// The DOM of `url` once its script has run.
    fn dom(&self, url: &str) -> String {
        let output = self.run(url, &["--dump-dom"]);
        assert!(
            output.status.success(),
            "chromium --dump-dom {url}: {}",
            text(&output.stderr)
        );
        text(&output.stdout)
    }

    /// The DOM of `url` once its script has run, and a screenshot of that
    /// moment at `path` (one load: the picture shows what the DOM holds).
    fn look(&self, url: &str, path: &Path) -> String {
        let _ = std::fs::remove_file(path);
        let screenshot = format!("--screenshot={}", path.display());
        let output = self.run(url, &["--dump-dom", &screenshot]);
        assert!(
            output.status.success() && path.exists(),
            "chromium --dump-dom --screenshot {url}: {}",
            text(&output.stderr)
        );
        text(&output.stdout)
    }
}

/// Polls `url` in `browser` until `shows` holds of its DOM (failing after
/// `limit`), and keeps the screenshot of that load as `name` in
/// `target/console-screenshots/`.
fn look_until(
    browser: &Browser,
    url: &str,
    limit: Duration,
    name: &str,
    what: &str,
    mut shows: impl FnMut(&str) -> bool,
) {
    let dir = screenshots();
    let trying = dir.join(format!("trying-{name}"));
    eventually(limit, what, || shows(&browser.look(url, &trying)));
    let path = dir.join(name);
    std::fs::rename(&trying, &path).unwrap();
    println!("screenshot: {}", path.display());
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    })
}

/// Where the screenshots go: `target/console-screenshots/`.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- reading the DOM -------------------------------------------------------

/// The opening tags `<tag …>` inside the element whose `id` is given (up
/// to its closing tag; the page nests no element in one of its own kind).
fn tags_in<'a>(dom: &'a str, id: &str, tag: &str) -> Vec<&'a str> {
    let Some(at) = dom.find(&format!(" id=\"{id}\"")) else {
        return Vec::new();
    };
    let open = dom[..at].rfind('<').map_or(0, |o| o + 1);
    let element = dom[open..at].trim();
    let inside = &dom[at..];
    let inside = &inside[..inside
        .find(&format!("</{element}>"))
        .unwrap_or(inside.len())];
    let start = format!("<{tag}");
    inside
        .match_indices(&start)
        .map(|(at, _)| &inside[at..])
        .filter(|rest| rest[start.len()..].starts_with([' ', '>']))
        .map(|rest| &rest[..rest.find('>').map_or(rest.len(), |end| end + 1)])
        .collect()
}

/// The value of attribute `name` in an opening tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')?;
    Some(&tag[start..start + end])
}

/// The nodes table's rows: (address, state letters).
fn node_rows(dom: &str) -> Vec<(String, String)> {
    tags_in(dom, "nodes", "tr")
        .into_iter()
        .filter_map(|tr| {
            Some((
                attribute(tr, "data-address")?.to_string(),
                attribute(tr, "data-state")?.to_string(),
            ))
        })
        .collect()
}

/// The ring's arcs (one per token range, or two for a whole-ring range).
fn arcs(dom: &str) -> usize {
    tags_in(dom, "ring", "path")
        .into_iter()
        .filter(|p| attribute(p, "class") == Some("arc"))
        .count()
}

/// The streams table's rows: (direction, state, progress 0 to 1).
fn stream_rows(dom: &str) -> Vec<(String, String, f64)> {
    tags_in(dom, "streams", "tr")
        .into_iter()
        .filter_map(|tr| {
            Some((
                attribute(tr, "data-direction")?.to_string(),
                attribute(tr, "data-state")?.to_string(),
                attribute(tr, "data-progress")?.parse().ok()?,
            ))
        })
        .collect()
}

// ---- plain HTTP ------------------------------------------------------------

/// `GET path` at `address`, with `Authorization: Bearer <token>` when
/// given: the status, the headers (lower-cased) and the body.
fn get(address: &str, path: &str, token: Option<&str>) -> (u16, String, String) {
    let answer = http_request(address, path, token);
    (answer.status, answer.head, answer.body)
}

/// `GET path` as JSON, which must answer 200.
fn get_json(address: &str, path: &str, token: Option<&str>) -> serde_json::Value {
    let (status, _, body) = get(address, path, token);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

// ---- the tests -------------------------------------------------------------

#[test]
fn the_console_shows_the_ring_a_node_going_down_and_a_joining_nodes_streams() {
    let began = Instant::now();
    let browser = Browser::new();
    let mut servers = Processes::new(221);
    // Streams at 1 MiB/s from each source, so that a join lasts seconds.
    let slow = [("RINGSTORE_STREAM_THROUGHPUT_MIB_PER_SEC", "1")];
    for i in 0..3 {
        servers.start(i, &slow);
    }
    servers.wait_until_all_un(0, 3);
    let console = format!("http://{}/", servers.address(0, 7200));

    // Three nodes up, and the ring: one arc per token range.
    let ring = get_json(&servers.address(0, 7200), "/api/v1/ring", None);
    let ranges = ring["ranges"].as_array().unwrap().len();
    assert!(ranges >= 3, "{ring}");
    look_until(
        &browser,
        &console,
        Duration::from_secs(20),
        "1-three-nodes-up.png",
        "the console shows 3 UN nodes and the ring",
        |dom| {
            let rows = node_rows(dom);
            rows.len() == 3 && rows.iter().all(|(_, state)| state == "UN") && arcs(dom) >= ranges
        },
    );

    // A node killed: its row shows DN within 15 s. The failure detector
    // takes 5–6 s; each look launches Chromium, which on a loaded 2-core
    // machine took up to 3 s (9.2 s in all seen with other builds running,
    // and over 10 s once, on a fresh machine building the suite beside it).
    let victim = servers.address(2, 7100);
    servers.kill(2);
    let killed = Instant::now();
    look_until(
        &browser,
        &console,
        DN_WITHIN,
        "2-one-node-down.png",
        "the console shows the killed node DN",
        |dom| node_rows(dom).contains(&(victim.clone(), "DN".to_string())),
    );
    let seen_down = killed.elapsed();
    println!("the killed node showed DN after {seen_down:?}");
    assert!(seen_down <= DN_WITHIN, "DN only after {seen_down:?}");

    // Back up, some data (20 MiB at RF 3), and a fourth node joining: the
    // joining node's console shows itself UJ and its streams (one per
    // source) under way.
    servers.start(2, &slow);
    servers.wait_until_all_un(0, 3);
    let stress = servers.cli(
        0,
        &[
            "stress",
            "write",
            "-n",
            "2500",
            "--key-count",
            "2500",
            "--value-size",
            "8192",
            "--keyspace",
            "ks",
            "--replication",
            "SimpleStrategy:3",
            "--consistency",
            "ALL",
        ],
    );
    assert!(stress.status.success(), "{}", text(&stress.stderr));
    servers.start(3, &slow);
    let joiner = servers.address(3, 7100);
    let joining = format!("http://{}/", servers.address(3, 7200));
    look_until(
        &browser,
        &joining,
        Duration::from_secs(30),
        "3-join-streaming.png",
        "the joining node's console shows its streams under way",
        |dom| {
            let streaming = stream_rows(dom).iter().any(|(direction, state, progress)| {
                direction == "receiving" && state == "running" && *progress > 0.0 && *progress < 1.0
            });
            streaming && node_rows(dom).contains(&(joiner.clone(), "UJ".to_string()))
        },
    );
    eventually(
        Duration::from_secs(60),
        "the joined node is UN on the console",
        || node_rows(&browser.dom(&console)).contains(&(joiner.clone(), "UN".to_string())),
    );
    println!("the whole test took {:?}", began.elapsed());
}

#[test]
fn the_console_api_answers_json_to_holders_of_the_token_and_names_unknown_paths() {
    const TOKEN: &str = "console-token-222-0123456789";
    let mut servers = Processes::new(222);
    let token_file = servers.dir().join("metrics-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    servers.start(
        0,
        &[(
            "RINGSTORE_METRICS_SECURITY__BEARER_TOKEN_FILE",
            token_file.to_str().unwrap(),
        )],
    );
    servers.wait_until_all_un(0, 1);
    let http = servers.address(0, 7200);

    // The page and its files need no token: they hold no data.
    let (status, head, page) = get(&http, "/", None);
    assert_eq!(status, 200, "{page}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(page.contains("<script src=\"/console.js\">"), "{page}");
    // Each file comes with a policy that lets the page run only its own
    // files (the browser tests above render under it) and no MIME sniffing.
    for asset in ["/", "/console.js", "/console.css"] {
        let (status, head, body) = get(&http, asset, None);
        assert_eq!(status, 200, "{asset}");
        assert!(!body.is_empty(), "{asset}");
        assert!(
            head.contains("content-security-policy: default-src 'none'; script-src 'self';"),
            "{asset}: {head}"
        );
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{asset}: {head}"
        );
    }
    // The API needs it, as /metrics does.
    for token in [None, Some("wrong-token")] {
        for path in ["/api/v1/nodes", "/api/v1/", "/api/v1/nope", "/metrics"] {
            let (status, head, body) = get(&http, path, token);
            assert_eq!(status, 401, "{path} with {token:?}: {body}");
            assert!(head.contains("www-authenticate: bearer"), "{path}: {head}");
        }
    }
    let (_, head, refused) = get(&http, "/api/v1/nodes", None);
    assert!(head.contains("content-type: application/json"), "{head}");
    let refused: serde_json::Value = serde_json::from_str(&refused).unwrap();
    assert!(
        refused["error"].as_str().unwrap().contains("bearer token"),
        "{refused}"
    );
    let token = Some(TOKEN);
    let (status, _, _) = get(&http, "/metrics", token);
    assert_eq!(status, 200);
    let (status, head, _) = get(&http, "/api/v1/nodes", token);
    assert_eq!(status, 200);
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");

    // Unknown API paths: 404, in JSON, naming the path; others plain 404.
    let (status, head, body) = get(&http, "/api/v1/nope", token);
    assert_eq!(status, 404, "{body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("/api/v1/nope"),
        "{error}"
    );
    assert_eq!(get(&http, "/nope", token).0, 404);

    // The shapes scripts read.
    let endpoints = get_json(&http, "/api/v1/", token);
    assert_eq!(
        endpoints["endpoints"].as_array().unwrap().len(),
        7,
        "{endpoints}"
    );
    let node = get_json(&http, "/api/v1/node", token);
    let host_id = node["host_id"].as_str().unwrap().to_string();
    assert_eq!(node["cluster_name"], "processes", "{node}");
    assert_eq!(node["state"], "NORMAL", "{node}");
    let nodes = get_json(&http, "/api/v1/nodes", token);
    let rows = nodes["nodes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{nodes}");
    assert_eq!(rows[0]["status"], "UN", "{nodes}");
    assert_eq!(rows[0]["host_id"], host_id.as_str(), "{nodes}");
    assert_eq!(rows[0]["local"], true, "{nodes}");
    assert_eq!(rows[0]["address"], servers.address(0, 7100).as_str());
    assert_eq!(rows[0]["ownership"], 1.0, "{nodes}");
    let ring = get_json(&http, "/api/v1/ring", token);
    let ranges = ring["ranges"].as_array().unwrap();
    assert_eq!(
        ranges.len() as u64,
        rows[0]["tokens"].as_u64().unwrap(),
        "{ring}"
    );
    let covered: f64 = ranges.iter().map(|r| r["fraction"].as_f64().unwrap()).sum();
    assert!((covered - 1.0).abs() < 1e-9, "{covered}");
    assert!(ranges.iter().all(|r| r["owner"] == host_id.as_str()));
    // Tokens are strings, whole: a JSON number would be rounded.
    let end: i64 = ranges[0]["end_token"].as_str().unwrap().parse().unwrap();
    assert!(end > i64::MIN, "{ring}");
    let streams = get_json(&http, "/api/v1/streams", token);
    assert_eq!(streams["mode"], "NORMAL", "{streams}");
    assert!(
        streams["streams"].as_array().unwrap().is_empty(),
        "{streams}"
    );
    let hints = get_json(&http, "/api/v1/hints", token);
    assert!(hints["targets"].as_array().unwrap().is_empty(), "{hints}");

    // Writes coordinated here show in the traffic history's next interval,
    // and their keyspace's ranges in the repair coverage (never repaired).
    servers.create_keyspace("ks", "SimpleStrategy:1");
    for i in 0..20 {
        let put = servers.cli(0, &["put", "ks", &format!("k{i}"), "v"]);
        assert!(put.status.success(), "{}", text(&put.stderr));
    }
    let repair = get_json(&http, "/api/v1/repair", token);
    let scheduled = repair["ranges"].as_array().unwrap();
    assert!(
        scheduled
            .iter()
            .any(|r| r["keyspace"] == "ks" && r["seconds_since_repair"].is_null()),
        "{repair}"
    );
    let mut traffic = serde_json::Value::Null;
    eventually(
        Duration::from_secs(20),
        "the traffic history has the writes",
        || {
            traffic = get_json(&http, "/api/v1/traffic", token);
            let points = traffic["points"].as_array().unwrap();
            let writes: f64 = points
                .iter()
                .map(|p| {
                    p["writes_per_second"].as_f64().unwrap()
                        * p["interval_seconds"].as_f64().unwrap()
                })
                .sum();
            writes >= 20.0 - 1e-6
        },
    );
    let point = traffic["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["writes_per_second"].as_f64().unwrap() > 0.0)
        .unwrap();
    assert!(point["write_p50_ms"].as_f64().unwrap() > 0.0, "{traffic}");
    assert!(point["write_p99_ms"].as_f64().unwrap() >= point["write_p50_ms"].as_f64().unwrap());
    assert_eq!(traffic["sample_every_seconds"], 5.0);

    // In a browser without the token, the page asks for it.
    let dom = Browser::new().dom(&format!("http://{http}/"));
    assert!(
        dom.contains("<form id=\"token-form\">"),
        "the token form is not shown: {dom}"
    );
}
