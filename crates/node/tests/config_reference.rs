//! `deploy/ringstore.toml` is the configuration reference: every setting of
//! every section of the configuration appears in it, set to its default or
//! commented out, under its section's header. (The config unit tests check
//! the other direction: the file parses, with unknown keys refused, to the
//! defaults.) The settings are read from the config types themselves, so a
//! new field that is not documented fails here.

use std::path::Path;

use ringstore_node::NodeConfig;
use ringstore_node::client_auth::AuthConfig;
use ringstore_node::config::{HintsConfig, RepairConfig, StorageConfig, TimeoutConfig};
use ringstore_node::metrics_http::MetricsSecurity;
use ringstore_node::tls::{ClientEncryption, ServerEncryption};
use serde::de::{self, DeserializeOwned, Visitor};

/// A deserializer that only records the field names of the struct asked for.
struct FieldNames<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("fields recorded"))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        enum identifier ignored_any
    }
}

/// The settings (field names) of config type `T`.
fn settings_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(FieldNames(&mut fields));
    fields.expect("config types are structs")
}

/// The lines of the sample file's `section` ("" is the top level: the lines
/// before the first header).
fn section_lines<'a>(sample: &'a str, section: &str) -> Vec<&'a str> {
    let header = format!("[{section}]");
    let mut current = String::new();
    sample
        .lines()
        .filter(|line| {
            if line.starts_with('[') {
                current = line.trim().to_string();
                return false;
            }
            if section.is_empty() {
                current.is_empty()
            } else {
                current == header
            }
        })
        .collect()
}

/// Whether `lines` set `setting` or show it commented out (`# setting = …`).
fn documents(lines: &[&str], setting: &str) -> bool {
    lines.iter().any(|line| {
        let line = line.trim_start_matches('#').trim_start();
        line.strip_prefix(setting)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })
}

#[test]
fn the_sample_config_documents_every_setting_of_every_section() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/ringstore.toml");
    let sample = std::fs::read_to_string(&path).unwrap();
    let sections: [(&str, &[&str]); 9] = [
        ("", settings_of::<NodeConfig>()),
        ("storage", settings_of::<StorageConfig>()),
        ("timeouts", settings_of::<TimeoutConfig>()),
        ("hints", settings_of::<HintsConfig>()),
        ("repair", settings_of::<RepairConfig>()),
        ("client_encryption", settings_of::<ClientEncryption>()),
        ("server_encryption", settings_of::<ServerEncryption>()),
        ("auth", settings_of::<AuthConfig>()),
        ("metrics_security", settings_of::<MetricsSecurity>()),
    ];
    let tables: Vec<&str> = sections.iter().map(|(name, _)| *name).collect();
    let mut missing = Vec::new();
    for (section, settings) in sections {
        let lines = section_lines(&sample, section);
        for setting in settings {
            let documented = if section.is_empty() && tables.contains(setting) {
                sample
                    .lines()
                    .any(|line| line.trim() == format!("[{setting}]"))
            } else {
                documents(&lines, setting)
            };
            if !documented {
                missing.push(if section.is_empty() {
                    setting.to_string()
                } else {
                    format!("{section}.{setting}")
                });
            }
        }
    }
    assert!(
        missing.is_empty(),
        "deploy/ringstore.toml does not document {missing:?}: add each, with a comment, \
         set to its default or commented out"
    );
}

#[test]
fn a_setting_outside_its_section_does_not_count() {
    let sample = "a = 1\n[storage]\n# b = 2\n";
    assert!(documents(&section_lines(sample, ""), "a"));
    assert!(!documents(&section_lines(sample, ""), "b"));
    assert!(documents(&section_lines(sample, "storage"), "b"));
    assert!(!documents(&section_lines(sample, "storage"), "a"));
    assert!(!documents(&["ab = 1"], "a"));
}
