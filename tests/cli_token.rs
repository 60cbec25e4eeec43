//! `ringstore token` as a user runs it: the real binary, its output and exit status.

use std::process::{Command, Output};

fn ringstore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringstore"))
        .args(args)
        .output()
        .expect("the ringstore binary runs")
}

#[test]
fn token_prints_cassandra_tokens_one_per_line() {
    let out = ringstore(&["token", "a", "hello"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "-8839064797231613815\n-3758069500696749310\n"
    );
    let hex = ringstore(&["token", "--hex", "80", "68656C6C6F"]);
    assert_eq!(
        String::from_utf8(hex.stdout).unwrap(),
        "-5284281814142962636\n-3758069500696749310\n"
    );
}

#[test]
fn bad_hex_is_a_clear_error_with_nonzero_exit() {
    let out = ringstore(&["token", "--hex", "zz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: key 1 (\"zz\") is not valid hex"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
}

#[test]
fn empty_key_is_a_clear_error_with_nonzero_exit() {
    for args in [&["token", ""][..], &["token", "--hex", ""][..]] {
        let out = ringstore(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("key 1 is empty"), "{stderr}");
    }
}

#[test]
fn token_without_keys_is_a_usage_error() {
    let out = ringstore(&["token"]);
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("KEY"));
}
