//! Where an Icechunk repository on object storage lives, as the `icechunk` crate's
//! storage: the bucket (or container) and prefix of its URL, and the store options of the
//! command line, each checked as a key of the URL's backend exactly as a remote store's
//! are (an option that is no such key, or that the crate's storage cannot take, is
//! refused, never dropped).

use std::collections::HashMap;
use std::sync::Arc;

use object_store::aws::AmazonS3ConfigKey;
use object_store::azure::AzureConfigKey;
use object_store::gcp::GoogleConfigKey;
use object_store::ClientConfigKey;
use url::Url;

use super::failed;
use crate::error::{Error, Result};
use crate::store::source::remote::client::config_keys;
use crate::store::source::remote::runtime::block_on;
use crate::store::StoreConfig;

/// The storage type of the `icechunk` crate.
pub(super) type Storage = Arc<dyn icechunk::Storage + Send + Sync>;

/// The storage of the repository at `url` (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`,
/// `az://CONTAINER/PREFIX`, or an `http(s)://` folder), named `label` in messages.
pub(super) fn for_url(url: &Url, cfg: &StoreConfig, label: &str) -> Result<Storage> {
    // The bucket (or container) and the prefix in it, for the cloud schemes.
    let bucket = url.host_str().unwrap_or_default().to_string();
    let prefix = Some(url.path().trim_matches('/').to_string()).filter(|p| !p.is_empty());
    match url.scheme() {
        "s3" | "s3a" => {
            let options = s3_options(url, cfg, label)?;
            block_on(icechunk::storage::new_s3_object_store_storage(
                options,
                bucket,
                prefix,
                Some(s3_credentials(cfg)),
                Vec::new(),
                Vec::new(),
            ))?
        }
        "az" | "azure" | "abfs" | "abfss" => {
            let options = as_map(config_keys::<AzureConfigKey>(url, &cfg.options)?);
            let emulator = options
                .get(AzureConfigKey::UseEmulator.as_ref())
                .is_some_and(|v| v == "true");
            let account = options
                .get(AzureConfigKey::AccountName.as_ref())
                .cloned()
                .or_else(|| std::env::var("AZURE_STORAGE_ACCOUNT_NAME").ok())
                .or_else(|| emulator.then(|| "devstoreaccount1".to_string()))
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "{label}: name the storage account (-o account_name=NAME, or \
                         AZURE_STORAGE_ACCOUNT_NAME in the environment)"
                    ))
                })?;
            let credentials = if cfg.anonymous {
                icechunk::storage::AzureCredentials::Anonymous
            } else {
                icechunk::storage::AzureCredentials::FromEnv
            };
            block_on(icechunk::storage::new_azure_blob_storage(
                account,
                bucket,
                prefix,
                Some(credentials),
                Some(options),
            ))?
        }
        "gs" | "gcs" => {
            let options = as_map(config_keys::<GoogleConfigKey>(url, &cfg.options)?);
            let credentials = if cfg.anonymous {
                icechunk::storage::GcsCredentials::Anonymous
            } else {
                icechunk::storage::GcsCredentials::FromEnv
            };
            icechunk::storage::new_gcs_storage(
                bucket,
                prefix,
                Some(credentials),
                Some(options),
                Vec::new(),
                Vec::new(),
            )
        }
        "http" | "https" => {
            config_keys::<ClientConfigKey>(url, &cfg.options)?;
            icechunk::storage::new_http_storage(url.as_str(), None, None)
        }
        other => {
            return Err(Error::Invalid(format!(
                "{label}: Icechunk repositories are read from local folders, s3://, gs://, \
                 az:// and http(s):// (not {other}:// yet)"
            )))
        }
    }
    .map_err(|e| failed(label, "storage", e))
}

/// Checked options as the crate's option map, each under its backend's own name.
fn as_map<K: AsRef<str>>(options: Vec<(K, String)>) -> HashMap<String, String> {
    options
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_string(), v))
        .collect()
}

/// The crate's S3 options from the store options: each must be an S3 key, and one the
/// crate's S3 storage takes (region, endpoint, plain HTTP, path or virtual-hosted style,
/// requester pays, unsigned requests).
fn s3_options(url: &Url, cfg: &StoreConfig, label: &str) -> Result<icechunk::storage::S3Options> {
    let mut options = icechunk::storage::S3Options::default().with_anonymous(cfg.anonymous);
    let mut path_style = None;
    for (key, value) in config_keys::<AmazonS3ConfigKey>(url, &cfg.options)? {
        let yes = value == "true";
        match key {
            AmazonS3ConfigKey::Region => options = options.with_region(value),
            AmazonS3ConfigKey::Endpoint => {
                options = options.with_endpoint_url(value);
                path_style.get_or_insert(true);
            }
            AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp) => {
                options = options.with_allow_http(yes)
            }
            AmazonS3ConfigKey::VirtualHostedStyleRequest => path_style = Some(!yes),
            AmazonS3ConfigKey::RequestPayer => options.requester_pays = yes,
            AmazonS3ConfigKey::SkipSignature => options = options.with_anonymous(yes),
            other => {
                return Err(Error::Invalid(format!(
                    "{label}: store option {}: not taken by Icechunk repositories on S3 \
                     (they take region, endpoint, allow_http, virtual_hosted_style_request, \
                     request_payer, skip_signature)",
                    other.as_ref()
                )))
            }
        }
    }
    Ok(options.with_force_path_style(path_style.unwrap_or(false)))
}

/// Unsigned requests with `--anonymous`, else credentials from the environment.
fn s3_credentials(cfg: &StoreConfig) -> icechunk::storage::S3Credentials {
    if cfg.anonymous {
        icechunk::storage::S3Credentials::Anonymous
    } else {
        icechunk::storage::S3Credentials::FromEnv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(options: &[(&str, &str)]) -> StoreConfig {
        StoreConfig {
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..StoreConfig::default()
        }
    }

    #[test]
    fn s3_options_are_checked_and_taken_or_refused() {
        let url = Url::parse("s3://bucket/repo").unwrap();
        let cfg = with(&[
            ("aws_region", "eu-west-3"),
            ("endpoint", "http://127.0.0.1:9"),
            ("allow_http", "true"),
        ]);
        let got = s3_options(&url, &cfg, "repo").unwrap();
        assert_eq!(got.region.as_deref(), Some("eu-west-3"));
        assert_eq!(got.endpoint_url.as_deref(), Some("http://127.0.0.1:9"));
        assert!(got.allow_http && got.force_path_style);
        let unknown = s3_options(&url, &with(&[("no_such_option", "1")]), "repo");
        assert!(unknown.is_err_and(|e| e.to_string().contains("no_such_option")));
        let dropped = s3_options(&url, &with(&[("aws_imdsv1_fallback", "true")]), "repo");
        assert!(dropped.is_err_and(|e| e.to_string().contains("not taken")));
    }
}
