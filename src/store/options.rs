//! How a store is opened: the options of `--anonymous`, `--zip`, `--timeout`,
//! `--retries` and `-o key=value`, and the secrets that must never reach a message.

use std::time::Duration;

use crate::error::{Error, Result};

/// Options for opening a store, from the command line.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Unsigned requests (public buckets).
    pub anonymous: bool,
    /// Open the store as a zip archive whatever its name.
    pub zip: bool,
    /// Backend options (`endpoint`, `region`, `allow_http`, ...), passed through.
    pub options: Vec<(String, String)>,
    /// Time allowed for one request.
    pub timeout: Duration,
    /// Retries of a failed request, with backoff.
    pub retries: usize,
    /// Requests in flight at most.
    pub max_requests: usize,
    /// A folder for a disk cache of fetched values (remote stores), and its budget.
    pub disk_cache: Option<(std::path::PathBuf, u64)>,
    /// How long the disk cache may take an object's version as known before it asks
    /// again (a mount's refresh interval); `None`: for the process's life.
    pub revalidate: Option<Duration>,
    /// Names of the files that mark the root of what a store holds (the format's, given
    /// by the layer that knows the format): a zip archive whose files all lie in one
    /// top-level folder holding one is opened at that folder. Empty: at that folder
    /// whenever there is only one.
    pub root_markers: Vec<String>,
    /// Where the targets of a reference set may lie besides the set's own folder: local
    /// folders or URL prefixes (`--virtual-prefix`).
    pub virtual_prefixes: Vec<String>,
    /// Which version of an Icechunk repository to show (`--ref`, `--snapshot`,
    /// `--versions`).
    pub icechunk: VersionChoice,
}

/// Which version of an Icechunk repository: `--ref` (a branch or a tag), or
/// `--snapshot`; default the tip of branch `main`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionChoice {
    pub reference: Option<String>,
    pub snapshot: Option<String>,
    /// Every branch, tag and snapshot as folders beside the default tree.
    pub all: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            anonymous: false,
            zip: false,
            options: Vec::new(),
            timeout: Duration::from_secs(30),
            retries: 3,
            max_requests: 32,
            disk_cache: None,
            revalidate: None,
            root_markers: Vec::new(),
            virtual_prefixes: Vec::new(),
            icechunk: VersionChoice::default(),
        }
    }
}

/// Words that name a credential in an option key: such options are refused on the
/// command line (where `ps` shows them) and must come from the environment.
const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "password",
    "access_key",
    "account_key",
    "key_id",
    "sas",
    "credential",
    "service_account_key",
];

/// Environment variables whose values are credentials.
#[cfg(feature = "remote")]
const SECRET_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
];

impl StoreConfig {
    /// Parse `-o key=value` options meant for the store. A credential is refused: it would
    /// show in `ps`; it belongs in the environment.
    pub fn add_option(&mut self, option: &str) -> Result<()> {
        let Some((key, value)) = option.split_once('=') else {
            return Err(Error::Invalid(format!(
                "store option {option:?}: not key=value"
            )));
        };
        let key = key.trim().to_ascii_lowercase();
        if is_secret_key(&key) {
            return Err(Error::Invalid(format!(
                "store option {key}: credentials are read from the environment (or the \
                 backend's credential file), never from the command line"
            )));
        }
        self.options.push((key, value.trim().to_string()));
        Ok(())
    }
}

/// Whether an option key names a credential.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| key.contains(w))
}

/// Credential strings known to this process, to scrub from messages.
#[cfg(feature = "remote")]
#[derive(Debug, Clone, Default)]
pub struct Secrets(Vec<String>);

#[cfg(feature = "remote")]
impl Secrets {
    /// The credentials in the environment and in the options.
    pub fn gather(cfg: &StoreConfig) -> Secrets {
        let mut found: Vec<String> = SECRET_VARS
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .chain(
                cfg.options
                    .iter()
                    .filter(|(k, _)| is_secret_key(k))
                    .map(|(_, v)| v.clone()),
            )
            .filter(|s| s.len() >= 4)
            .collect();
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Secrets(found)
    }

    /// `text` with every known credential and every URL query string replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = self
            .0
            .iter()
            .fold(text.to_string(), |t, s| t.replace(s.as_str(), "***"));
        // Signed URLs carry their signature in the query.
        let mut from = 0;
        while let Some(q) = out[from..].find('?').map(|i| i + from) {
            let end = out[q..]
                .find(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == '\'')
                .map_or(out.len(), |i| i + q);
            out.replace_range(q..end, "?***");
            from = q + 4;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_credentials_on_the_command_line() {
        let mut cfg = StoreConfig::default();
        cfg.add_option("endpoint=http://127.0.0.1:9000").unwrap();
        cfg.add_option("region=eu-west-1").unwrap();
        for bad in [
            "aws_secret_access_key=x",
            "access_key_id=x",
            "token=x",
            "azure_storage_sas_key=x",
        ] {
            let err = cfg.add_option(bad).unwrap_err().to_string();
            assert!(err.contains("environment"), "{bad}: {err}");
        }
        assert!(cfg.add_option("no-value").is_err());
        assert_eq!(cfg.options.len(), 2);
    }

    #[cfg(feature = "remote")]
    #[test]
    fn scrubs_secrets_and_queries() {
        let s = Secrets(vec!["hunter22".into()]);
        let text = "GET http://h/k?X-Amz-Signature=abc&x=1 (key hunter22) failed";
        let out = s.scrub(text);
        assert_eq!(out, "GET http://h/k?*** (key ***) failed");
    }
}
